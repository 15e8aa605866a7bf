from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AttrType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INT: _ClassVar[AttrType]
    FLOAT: _ClassVar[AttrType]
    STRING: _ClassVar[AttrType]
    INTS: _ClassVar[AttrType]
    FLOATS: _ClassVar[AttrType]
    STRINGS: _ClassVar[AttrType]
    BOOLEAN: _ClassVar[AttrType]
    BOOLEANS: _ClassVar[AttrType]
    BLOCK: _ClassVar[AttrType]
    LONG: _ClassVar[AttrType]
    BLOCKS: _ClassVar[AttrType]
    LONGS: _ClassVar[AttrType]
    FLOAT64S: _ClassVar[AttrType]
    VAR: _ClassVar[AttrType]
    VARS: _ClassVar[AttrType]
    FLOAT64: _ClassVar[AttrType]
    SCALAR: _ClassVar[AttrType]
    SCALARS: _ClassVar[AttrType]
INT: AttrType
FLOAT: AttrType
STRING: AttrType
INTS: AttrType
FLOATS: AttrType
STRINGS: AttrType
BOOLEAN: AttrType
BOOLEANS: AttrType
BLOCK: AttrType
LONG: AttrType
BLOCKS: AttrType
LONGS: AttrType
FLOAT64S: AttrType
VAR: AttrType
VARS: AttrType
FLOAT64: AttrType
SCALAR: AttrType
SCALARS: AttrType

class Version(_message.Message):
    __slots__ = ("version",)
    VERSION_FIELD_NUMBER: _ClassVar[int]
    version: int
    def __init__(self, version: _Optional[int] = ...) -> None: ...

class Complex(_message.Message):
    __slots__ = ("r", "i")
    R_FIELD_NUMBER: _ClassVar[int]
    I_FIELD_NUMBER: _ClassVar[int]
    r: float
    i: float
    def __init__(self, r: _Optional[float] = ..., i: _Optional[float] = ...) -> None: ...

class Scalar(_message.Message):
    __slots__ = ("type", "b", "i", "r", "c")
    class Type(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        BOOLEAN: _ClassVar[Scalar.Type]
        LONG: _ClassVar[Scalar.Type]
        FLOAT64: _ClassVar[Scalar.Type]
        COMPLEX128: _ClassVar[Scalar.Type]
    BOOLEAN: Scalar.Type
    LONG: Scalar.Type
    FLOAT64: Scalar.Type
    COMPLEX128: Scalar.Type
    TYPE_FIELD_NUMBER: _ClassVar[int]
    B_FIELD_NUMBER: _ClassVar[int]
    I_FIELD_NUMBER: _ClassVar[int]
    R_FIELD_NUMBER: _ClassVar[int]
    C_FIELD_NUMBER: _ClassVar[int]
    type: Scalar.Type
    b: bool
    i: int
    r: float
    c: Complex
    def __init__(self, type: _Optional[_Union[Scalar.Type, str]] = ..., b: _Optional[bool] = ..., i: _Optional[int] = ..., r: _Optional[float] = ..., c: _Optional[_Union[Complex, _Mapping]] = ...) -> None: ...

class OpDesc(_message.Message):
    __slots__ = ("type", "inputs", "outputs", "attrs", "is_target", "struct_name", "dist_attr", "id", "forward_op_id")
    class Attr(_message.Message):
        __slots__ = ("name", "type", "i", "f", "s", "ints", "floats", "strings", "b", "bools", "block_idx", "l", "blocks_idx", "longs", "float64s", "var_name", "vars_name", "float64", "scalar", "scalars")
        NAME_FIELD_NUMBER: _ClassVar[int]
        TYPE_FIELD_NUMBER: _ClassVar[int]
        I_FIELD_NUMBER: _ClassVar[int]
        F_FIELD_NUMBER: _ClassVar[int]
        S_FIELD_NUMBER: _ClassVar[int]
        INTS_FIELD_NUMBER: _ClassVar[int]
        FLOATS_FIELD_NUMBER: _ClassVar[int]
        STRINGS_FIELD_NUMBER: _ClassVar[int]
        B_FIELD_NUMBER: _ClassVar[int]
        BOOLS_FIELD_NUMBER: _ClassVar[int]
        BLOCK_IDX_FIELD_NUMBER: _ClassVar[int]
        L_FIELD_NUMBER: _ClassVar[int]
        BLOCKS_IDX_FIELD_NUMBER: _ClassVar[int]
        LONGS_FIELD_NUMBER: _ClassVar[int]
        FLOAT64S_FIELD_NUMBER: _ClassVar[int]
        VAR_NAME_FIELD_NUMBER: _ClassVar[int]
        VARS_NAME_FIELD_NUMBER: _ClassVar[int]
        FLOAT64_FIELD_NUMBER: _ClassVar[int]
        SCALAR_FIELD_NUMBER: _ClassVar[int]
        SCALARS_FIELD_NUMBER: _ClassVar[int]
        name: str
        type: AttrType
        i: int
        f: float
        s: str
        ints: _containers.RepeatedScalarFieldContainer[int]
        floats: _containers.RepeatedScalarFieldContainer[float]
        strings: _containers.RepeatedScalarFieldContainer[str]
        b: bool
        bools: _containers.RepeatedScalarFieldContainer[bool]
        block_idx: int
        l: int
        blocks_idx: _containers.RepeatedScalarFieldContainer[int]
        longs: _containers.RepeatedScalarFieldContainer[int]
        float64s: _containers.RepeatedScalarFieldContainer[float]
        var_name: str
        vars_name: _containers.RepeatedScalarFieldContainer[str]
        float64: float
        scalar: Scalar
        scalars: _containers.RepeatedCompositeFieldContainer[Scalar]
        def __init__(self, name: _Optional[str] = ..., type: _Optional[_Union[AttrType, str]] = ..., i: _Optional[int] = ..., f: _Optional[float] = ..., s: _Optional[str] = ..., ints: _Optional[_Iterable[int]] = ..., floats: _Optional[_Iterable[float]] = ..., strings: _Optional[_Iterable[str]] = ..., b: _Optional[bool] = ..., bools: _Optional[_Iterable[bool]] = ..., block_idx: _Optional[int] = ..., l: _Optional[int] = ..., blocks_idx: _Optional[_Iterable[int]] = ..., longs: _Optional[_Iterable[int]] = ..., float64s: _Optional[_Iterable[float]] = ..., var_name: _Optional[str] = ..., vars_name: _Optional[_Iterable[str]] = ..., float64: _Optional[float] = ..., scalar: _Optional[_Union[Scalar, _Mapping]] = ..., scalars: _Optional[_Iterable[_Union[Scalar, _Mapping]]] = ...) -> None: ...
    class Var(_message.Message):
        __slots__ = ("parameter", "arguments")
        PARAMETER_FIELD_NUMBER: _ClassVar[int]
        ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
        parameter: str
        arguments: _containers.RepeatedScalarFieldContainer[str]
        def __init__(self, parameter: _Optional[str] = ..., arguments: _Optional[_Iterable[str]] = ...) -> None: ...
    TYPE_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    ATTRS_FIELD_NUMBER: _ClassVar[int]
    IS_TARGET_FIELD_NUMBER: _ClassVar[int]
    STRUCT_NAME_FIELD_NUMBER: _ClassVar[int]
    DIST_ATTR_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    FORWARD_OP_ID_FIELD_NUMBER: _ClassVar[int]
    type: str
    inputs: _containers.RepeatedCompositeFieldContainer[OpDesc.Var]
    outputs: _containers.RepeatedCompositeFieldContainer[OpDesc.Var]
    attrs: _containers.RepeatedCompositeFieldContainer[OpDesc.Attr]
    is_target: bool
    struct_name: str
    dist_attr: OperatorDistAttr
    id: int
    forward_op_id: int
    def __init__(self, type: _Optional[str] = ..., inputs: _Optional[_Iterable[_Union[OpDesc.Var, _Mapping]]] = ..., outputs: _Optional[_Iterable[_Union[OpDesc.Var, _Mapping]]] = ..., attrs: _Optional[_Iterable[_Union[OpDesc.Attr, _Mapping]]] = ..., is_target: _Optional[bool] = ..., struct_name: _Optional[str] = ..., dist_attr: _Optional[_Union[OperatorDistAttr, _Mapping]] = ..., id: _Optional[int] = ..., forward_op_id: _Optional[int] = ...) -> None: ...

class VarType(_message.Message):
    __slots__ = ("type", "selected_rows", "dense_tensor", "tensor_array", "reader", "tuple", "string", "strings", "vocab", "sparse_coo", "sparse_csr")
    class Type(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        BOOL: _ClassVar[VarType.Type]
        INT16: _ClassVar[VarType.Type]
        INT32: _ClassVar[VarType.Type]
        INT64: _ClassVar[VarType.Type]
        FP16: _ClassVar[VarType.Type]
        FP32: _ClassVar[VarType.Type]
        FP64: _ClassVar[VarType.Type]
        SIZE_T: _ClassVar[VarType.Type]
        UINT8: _ClassVar[VarType.Type]
        INT8: _ClassVar[VarType.Type]
        BF16: _ClassVar[VarType.Type]
        COMPLEX64: _ClassVar[VarType.Type]
        COMPLEX128: _ClassVar[VarType.Type]
        FP8_E4M3FN: _ClassVar[VarType.Type]
        FP8_E5M2: _ClassVar[VarType.Type]
        UINT16: _ClassVar[VarType.Type]
        UINT32: _ClassVar[VarType.Type]
        UINT64: _ClassVar[VarType.Type]
        DENSE_TENSOR: _ClassVar[VarType.Type]
        SELECTED_ROWS: _ClassVar[VarType.Type]
        FEED_MINIBATCH: _ClassVar[VarType.Type]
        FETCH_LIST: _ClassVar[VarType.Type]
        STEP_SCOPES: _ClassVar[VarType.Type]
        LOD_RANK_TABLE: _ClassVar[VarType.Type]
        DENSE_TENSOR_ARRAY: _ClassVar[VarType.Type]
        PLACE_LIST: _ClassVar[VarType.Type]
        READER: _ClassVar[VarType.Type]
        RAW: _ClassVar[VarType.Type]
        TUPLE: _ClassVar[VarType.Type]
        STRING: _ClassVar[VarType.Type]
        STRINGS: _ClassVar[VarType.Type]
        VOCAB: _ClassVar[VarType.Type]
        FEED_LIST: _ClassVar[VarType.Type]
        PSTRING: _ClassVar[VarType.Type]
        SPARSE_COO: _ClassVar[VarType.Type]
        SPARSE_CSR: _ClassVar[VarType.Type]
    BOOL: VarType.Type
    INT16: VarType.Type
    INT32: VarType.Type
    INT64: VarType.Type
    FP16: VarType.Type
    FP32: VarType.Type
    FP64: VarType.Type
    SIZE_T: VarType.Type
    UINT8: VarType.Type
    INT8: VarType.Type
    BF16: VarType.Type
    COMPLEX64: VarType.Type
    COMPLEX128: VarType.Type
    FP8_E4M3FN: VarType.Type
    FP8_E5M2: VarType.Type
    UINT16: VarType.Type
    UINT32: VarType.Type
    UINT64: VarType.Type
    DENSE_TENSOR: VarType.Type
    SELECTED_ROWS: VarType.Type
    FEED_MINIBATCH: VarType.Type
    FETCH_LIST: VarType.Type
    STEP_SCOPES: VarType.Type
    LOD_RANK_TABLE: VarType.Type
    DENSE_TENSOR_ARRAY: VarType.Type
    PLACE_LIST: VarType.Type
    READER: VarType.Type
    RAW: VarType.Type
    TUPLE: VarType.Type
    STRING: VarType.Type
    STRINGS: VarType.Type
    VOCAB: VarType.Type
    FEED_LIST: VarType.Type
    PSTRING: VarType.Type
    SPARSE_COO: VarType.Type
    SPARSE_CSR: VarType.Type
    class TensorDesc(_message.Message):
        __slots__ = ("data_type", "dims")
        DATA_TYPE_FIELD_NUMBER: _ClassVar[int]
        DIMS_FIELD_NUMBER: _ClassVar[int]
        data_type: VarType.Type
        dims: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, data_type: _Optional[_Union[VarType.Type, str]] = ..., dims: _Optional[_Iterable[int]] = ...) -> None: ...
    class DenseTensorDesc(_message.Message):
        __slots__ = ("tensor", "legacy_lod_level")
        TENSOR_FIELD_NUMBER: _ClassVar[int]
        LEGACY_LOD_LEVEL_FIELD_NUMBER: _ClassVar[int]
        tensor: VarType.TensorDesc
        legacy_lod_level: int
        def __init__(self, tensor: _Optional[_Union[VarType.TensorDesc, _Mapping]] = ..., legacy_lod_level: _Optional[int] = ...) -> None: ...
    class DenseTensorArrayDesc(_message.Message):
        __slots__ = ("tensor", "legacy_lod_level")
        TENSOR_FIELD_NUMBER: _ClassVar[int]
        LEGACY_LOD_LEVEL_FIELD_NUMBER: _ClassVar[int]
        tensor: VarType.TensorDesc
        legacy_lod_level: int
        def __init__(self, tensor: _Optional[_Union[VarType.TensorDesc, _Mapping]] = ..., legacy_lod_level: _Optional[int] = ...) -> None: ...
    class ReaderDesc(_message.Message):
        __slots__ = ("dense_tensor",)
        DENSE_TENSOR_FIELD_NUMBER: _ClassVar[int]
        dense_tensor: _containers.RepeatedCompositeFieldContainer[VarType.DenseTensorDesc]
        def __init__(self, dense_tensor: _Optional[_Iterable[_Union[VarType.DenseTensorDesc, _Mapping]]] = ...) -> None: ...
    class Tuple(_message.Message):
        __slots__ = ("element_type",)
        ELEMENT_TYPE_FIELD_NUMBER: _ClassVar[int]
        element_type: _containers.RepeatedScalarFieldContainer[VarType.Type]
        def __init__(self, element_type: _Optional[_Iterable[_Union[VarType.Type, str]]] = ...) -> None: ...
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SELECTED_ROWS_FIELD_NUMBER: _ClassVar[int]
    DENSE_TENSOR_FIELD_NUMBER: _ClassVar[int]
    TENSOR_ARRAY_FIELD_NUMBER: _ClassVar[int]
    READER_FIELD_NUMBER: _ClassVar[int]
    TUPLE_FIELD_NUMBER: _ClassVar[int]
    STRING_FIELD_NUMBER: _ClassVar[int]
    STRINGS_FIELD_NUMBER: _ClassVar[int]
    VOCAB_FIELD_NUMBER: _ClassVar[int]
    SPARSE_COO_FIELD_NUMBER: _ClassVar[int]
    SPARSE_CSR_FIELD_NUMBER: _ClassVar[int]
    type: VarType.Type
    selected_rows: VarType.TensorDesc
    dense_tensor: VarType.DenseTensorDesc
    tensor_array: VarType.DenseTensorArrayDesc
    reader: VarType.ReaderDesc
    tuple: VarType.Tuple
    string: VarType.TensorDesc
    strings: VarType.TensorDesc
    vocab: VarType.TensorDesc
    sparse_coo: VarType.TensorDesc
    sparse_csr: VarType.TensorDesc
    def __init__(self, type: _Optional[_Union[VarType.Type, str]] = ..., selected_rows: _Optional[_Union[VarType.TensorDesc, _Mapping]] = ..., dense_tensor: _Optional[_Union[VarType.DenseTensorDesc, _Mapping]] = ..., tensor_array: _Optional[_Union[VarType.DenseTensorArrayDesc, _Mapping]] = ..., reader: _Optional[_Union[VarType.ReaderDesc, _Mapping]] = ..., tuple: _Optional[_Union[VarType.Tuple, _Mapping]] = ..., string: _Optional[_Union[VarType.TensorDesc, _Mapping]] = ..., strings: _Optional[_Union[VarType.TensorDesc, _Mapping]] = ..., vocab: _Optional[_Union[VarType.TensorDesc, _Mapping]] = ..., sparse_coo: _Optional[_Union[VarType.TensorDesc, _Mapping]] = ..., sparse_csr: _Optional[_Union[VarType.TensorDesc, _Mapping]] = ...) -> None: ...

class VarDesc(_message.Message):
    __slots__ = ("name", "type", "persistable", "need_check_feed", "is_parameter", "stop_gradient", "attrs", "dist_attr")
    class Attr(_message.Message):
        __slots__ = ("name", "type", "i", "s", "ints")
        NAME_FIELD_NUMBER: _ClassVar[int]
        TYPE_FIELD_NUMBER: _ClassVar[int]
        I_FIELD_NUMBER: _ClassVar[int]
        S_FIELD_NUMBER: _ClassVar[int]
        INTS_FIELD_NUMBER: _ClassVar[int]
        name: str
        type: AttrType
        i: int
        s: str
        ints: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, name: _Optional[str] = ..., type: _Optional[_Union[AttrType, str]] = ..., i: _Optional[int] = ..., s: _Optional[str] = ..., ints: _Optional[_Iterable[int]] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PERSISTABLE_FIELD_NUMBER: _ClassVar[int]
    NEED_CHECK_FEED_FIELD_NUMBER: _ClassVar[int]
    IS_PARAMETER_FIELD_NUMBER: _ClassVar[int]
    STOP_GRADIENT_FIELD_NUMBER: _ClassVar[int]
    ATTRS_FIELD_NUMBER: _ClassVar[int]
    DIST_ATTR_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: VarType
    persistable: bool
    need_check_feed: bool
    is_parameter: bool
    stop_gradient: bool
    attrs: _containers.RepeatedCompositeFieldContainer[VarDesc.Attr]
    dist_attr: TensorDistAttr
    def __init__(self, name: _Optional[str] = ..., type: _Optional[_Union[VarType, _Mapping]] = ..., persistable: _Optional[bool] = ..., need_check_feed: _Optional[bool] = ..., is_parameter: _Optional[bool] = ..., stop_gradient: _Optional[bool] = ..., attrs: _Optional[_Iterable[_Union[VarDesc.Attr, _Mapping]]] = ..., dist_attr: _Optional[_Union[TensorDistAttr, _Mapping]] = ...) -> None: ...

class BlockDesc(_message.Message):
    __slots__ = ("idx", "parent_idx", "vars", "ops", "forward_block_idx")
    IDX_FIELD_NUMBER: _ClassVar[int]
    PARENT_IDX_FIELD_NUMBER: _ClassVar[int]
    VARS_FIELD_NUMBER: _ClassVar[int]
    OPS_FIELD_NUMBER: _ClassVar[int]
    FORWARD_BLOCK_IDX_FIELD_NUMBER: _ClassVar[int]
    idx: int
    parent_idx: int
    vars: _containers.RepeatedCompositeFieldContainer[VarDesc]
    ops: _containers.RepeatedCompositeFieldContainer[OpDesc]
    forward_block_idx: int
    def __init__(self, idx: _Optional[int] = ..., parent_idx: _Optional[int] = ..., vars: _Optional[_Iterable[_Union[VarDesc, _Mapping]]] = ..., ops: _Optional[_Iterable[_Union[OpDesc, _Mapping]]] = ..., forward_block_idx: _Optional[int] = ...) -> None: ...

class OpVersion(_message.Message):
    __slots__ = ("version",)
    VERSION_FIELD_NUMBER: _ClassVar[int]
    version: int
    def __init__(self, version: _Optional[int] = ...) -> None: ...

class OpVersionMap(_message.Message):
    __slots__ = ("pair",)
    class OpVersionPair(_message.Message):
        __slots__ = ("op_name", "op_version")
        OP_NAME_FIELD_NUMBER: _ClassVar[int]
        OP_VERSION_FIELD_NUMBER: _ClassVar[int]
        op_name: str
        op_version: OpVersion
        def __init__(self, op_name: _Optional[str] = ..., op_version: _Optional[_Union[OpVersion, _Mapping]] = ...) -> None: ...
    PAIR_FIELD_NUMBER: _ClassVar[int]
    pair: _containers.RepeatedCompositeFieldContainer[OpVersionMap.OpVersionPair]
    def __init__(self, pair: _Optional[_Iterable[_Union[OpVersionMap.OpVersionPair, _Mapping]]] = ...) -> None: ...

class ProgramDesc(_message.Message):
    __slots__ = ("blocks", "version", "op_version_map", "process_meshes", "pipeline_plan")
    BLOCKS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    OP_VERSION_MAP_FIELD_NUMBER: _ClassVar[int]
    PROCESS_MESHES_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_PLAN_FIELD_NUMBER: _ClassVar[int]
    blocks: _containers.RepeatedCompositeFieldContainer[BlockDesc]
    version: Version
    op_version_map: OpVersionMap
    process_meshes: _containers.RepeatedCompositeFieldContainer[ProcessMesh]
    pipeline_plan: PipelinePlan
    def __init__(self, blocks: _Optional[_Iterable[_Union[BlockDesc, _Mapping]]] = ..., version: _Optional[_Union[Version, _Mapping]] = ..., op_version_map: _Optional[_Union[OpVersionMap, _Mapping]] = ..., process_meshes: _Optional[_Iterable[_Union[ProcessMesh, _Mapping]]] = ..., pipeline_plan: _Optional[_Union[PipelinePlan, _Mapping]] = ...) -> None: ...

class ProcessMesh(_message.Message):
    __slots__ = ("shape", "process_ids", "dim_names")
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    PROCESS_IDS_FIELD_NUMBER: _ClassVar[int]
    DIM_NAMES_FIELD_NUMBER: _ClassVar[int]
    shape: _containers.RepeatedScalarFieldContainer[int]
    process_ids: _containers.RepeatedScalarFieldContainer[int]
    dim_names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, shape: _Optional[_Iterable[int]] = ..., process_ids: _Optional[_Iterable[int]] = ..., dim_names: _Optional[_Iterable[str]] = ...) -> None: ...

class TensorDistAttr(_message.Message):
    __slots__ = ("process_mesh", "dims_mapping", "batch_dim", "dynamic_dims", "chunk_id")
    PROCESS_MESH_FIELD_NUMBER: _ClassVar[int]
    DIMS_MAPPING_FIELD_NUMBER: _ClassVar[int]
    BATCH_DIM_FIELD_NUMBER: _ClassVar[int]
    DYNAMIC_DIMS_FIELD_NUMBER: _ClassVar[int]
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    process_mesh: ProcessMesh
    dims_mapping: _containers.RepeatedScalarFieldContainer[int]
    batch_dim: int
    dynamic_dims: _containers.RepeatedScalarFieldContainer[bool]
    chunk_id: int
    def __init__(self, process_mesh: _Optional[_Union[ProcessMesh, _Mapping]] = ..., dims_mapping: _Optional[_Iterable[int]] = ..., batch_dim: _Optional[int] = ..., dynamic_dims: _Optional[_Iterable[bool]] = ..., chunk_id: _Optional[int] = ...) -> None: ...

class TensorDistAttrMappingEntry(_message.Message):
    __slots__ = ("name", "tensor_dist_attr")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TENSOR_DIST_ATTR_FIELD_NUMBER: _ClassVar[int]
    name: str
    tensor_dist_attr: TensorDistAttr
    def __init__(self, name: _Optional[str] = ..., tensor_dist_attr: _Optional[_Union[TensorDistAttr, _Mapping]] = ...) -> None: ...

class OperatorDistAttr(_message.Message):
    __slots__ = ("input_dist_attrs", "output_dist_attrs", "process_mesh", "impl_type", "impl_idx", "chunk_id")
    INPUT_DIST_ATTRS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_DIST_ATTRS_FIELD_NUMBER: _ClassVar[int]
    PROCESS_MESH_FIELD_NUMBER: _ClassVar[int]
    IMPL_TYPE_FIELD_NUMBER: _ClassVar[int]
    IMPL_IDX_FIELD_NUMBER: _ClassVar[int]
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    input_dist_attrs: _containers.RepeatedCompositeFieldContainer[TensorDistAttrMappingEntry]
    output_dist_attrs: _containers.RepeatedCompositeFieldContainer[TensorDistAttrMappingEntry]
    process_mesh: ProcessMesh
    impl_type: str
    impl_idx: int
    chunk_id: int
    def __init__(self, input_dist_attrs: _Optional[_Iterable[_Union[TensorDistAttrMappingEntry, _Mapping]]] = ..., output_dist_attrs: _Optional[_Iterable[_Union[TensorDistAttrMappingEntry, _Mapping]]] = ..., process_mesh: _Optional[_Union[ProcessMesh, _Mapping]] = ..., impl_type: _Optional[str] = ..., impl_idx: _Optional[int] = ..., chunk_id: _Optional[int] = ...) -> None: ...

class PlanSegment(_message.Message):
    __slots__ = ("virtual_stage", "stage", "chunk", "mesh", "layers", "op_begin", "op_end", "cost")
    VIRTUAL_STAGE_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    MESH_FIELD_NUMBER: _ClassVar[int]
    LAYERS_FIELD_NUMBER: _ClassVar[int]
    OP_BEGIN_FIELD_NUMBER: _ClassVar[int]
    OP_END_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    virtual_stage: int
    stage: int
    chunk: int
    mesh: ProcessMesh
    layers: _containers.RepeatedScalarFieldContainer[str]
    op_begin: int
    op_end: int
    cost: float
    def __init__(self, virtual_stage: _Optional[int] = ..., stage: _Optional[int] = ..., chunk: _Optional[int] = ..., mesh: _Optional[_Union[ProcessMesh, _Mapping]] = ..., layers: _Optional[_Iterable[str]] = ..., op_begin: _Optional[int] = ..., op_end: _Optional[int] = ..., cost: _Optional[float] = ...) -> None: ...

class PipelinePlan(_message.Message):
    __slots__ = ("pp", "vpp", "seg_method", "placement", "mode", "segments", "vppctl_version", "split", "cost")
    PP_FIELD_NUMBER: _ClassVar[int]
    VPP_FIELD_NUMBER: _ClassVar[int]
    SEG_METHOD_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    VPPCTL_VERSION_FIELD_NUMBER: _ClassVar[int]
    SPLIT_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    pp: int
    vpp: int
    seg_method: str
    placement: str
    mode: str
    segments: _containers.RepeatedCompositeFieldContainer[PlanSegment]
    vppctl_version: str
    split: str
    cost: str
    def __init__(self, pp: _Optional[int] = ..., vpp: _Optional[int] = ..., seg_method: _Optional[str] = ..., placement: _Optional[str] = ..., mode: _Optional[str] = ..., segments: _Optional[_Iterable[_Union[PlanSegment, _Mapping]]] = ..., vppctl_version: _Optional[str] = ..., split: _Optional[str] = ..., cost: _Optional[str] = ...) -> None: ...
