from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LazyProgram(_message.Message):
    __slots__ = ("blocks", "version", "op_version_map", "process_meshes", "pipeline_plan")
    BLOCKS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    OP_VERSION_MAP_FIELD_NUMBER: _ClassVar[int]
    PROCESS_MESHES_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_PLAN_FIELD_NUMBER: _ClassVar[int]
    blocks: _containers.RepeatedCompositeFieldContainer[LazyBlock]
    version: _containers.RepeatedScalarFieldContainer[bytes]
    op_version_map: _containers.RepeatedScalarFieldContainer[bytes]
    process_meshes: _containers.RepeatedScalarFieldContainer[bytes]
    pipeline_plan: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, blocks: _Optional[_Iterable[_Union[LazyBlock, _Mapping]]] = ..., version: _Optional[_Iterable[bytes]] = ..., op_version_map: _Optional[_Iterable[bytes]] = ..., process_meshes: _Optional[_Iterable[bytes]] = ..., pipeline_plan: _Optional[_Iterable[bytes]] = ...) -> None: ...

class LazyBlock(_message.Message):
    __slots__ = ("idx", "parent_idx", "vars", "ops", "forward_block_idx")
    IDX_FIELD_NUMBER: _ClassVar[int]
    PARENT_IDX_FIELD_NUMBER: _ClassVar[int]
    VARS_FIELD_NUMBER: _ClassVar[int]
    OPS_FIELD_NUMBER: _ClassVar[int]
    FORWARD_BLOCK_IDX_FIELD_NUMBER: _ClassVar[int]
    idx: int
    parent_idx: int
    vars: _containers.RepeatedScalarFieldContainer[bytes]
    ops: _containers.RepeatedScalarFieldContainer[bytes]
    forward_block_idx: int
    def __init__(self, idx: _Optional[int] = ..., parent_idx: _Optional[int] = ..., vars: _Optional[_Iterable[bytes]] = ..., ops: _Optional[_Iterable[bytes]] = ..., forward_block_idx: _Optional[int] = ...) -> None: ...

class ScanOp(_message.Message):
    __slots__ = ("inputs", "outputs", "type", "attrs", "struct_name", "dist_attr", "id", "forward_op_id")
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ATTRS_FIELD_NUMBER: _ClassVar[int]
    STRUCT_NAME_FIELD_NUMBER: _ClassVar[int]
    DIST_ATTR_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    FORWARD_OP_ID_FIELD_NUMBER: _ClassVar[int]
    inputs: ScanArgs
    outputs: ScanArgs
    type: bytes
    attrs: _containers.RepeatedScalarFieldContainer[bytes]
    struct_name: bytes
    dist_attr: ScanOpDist
    id: int
    forward_op_id: int
    def __init__(self, inputs: _Optional[_Union[ScanArgs, _Mapping]] = ..., outputs: _Optional[_Union[ScanArgs, _Mapping]] = ..., type: _Optional[bytes] = ..., attrs: _Optional[_Iterable[bytes]] = ..., struct_name: _Optional[bytes] = ..., dist_attr: _Optional[_Union[ScanOpDist, _Mapping]] = ..., id: _Optional[int] = ..., forward_op_id: _Optional[int] = ...) -> None: ...

class ScanArgs(_message.Message):
    __slots__ = ("arguments",)
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    arguments: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, arguments: _Optional[_Iterable[bytes]] = ...) -> None: ...

class ScanOpDist(_message.Message):
    __slots__ = ("process_mesh", "chunk_id")
    PROCESS_MESH_FIELD_NUMBER: _ClassVar[int]
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    process_mesh: _containers.RepeatedScalarFieldContainer[bytes]
    chunk_id: int
    def __init__(self, process_mesh: _Optional[_Iterable[bytes]] = ..., chunk_id: _Optional[int] = ...) -> None: ...

class ScanMerge(_message.Message):
    __slots__ = ("inputs", "outputs", "type", "attrs", "struct_name", "dist_attr", "id", "forward_op_id")
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ATTRS_FIELD_NUMBER: _ClassVar[int]
    STRUCT_NAME_FIELD_NUMBER: _ClassVar[int]
    DIST_ATTR_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    FORWARD_OP_ID_FIELD_NUMBER: _ClassVar[int]
    inputs: ScanArgs
    outputs: ScanArgs
    type: _containers.RepeatedScalarFieldContainer[bytes]
    attrs: _containers.RepeatedScalarFieldContainer[bytes]
    struct_name: _containers.RepeatedScalarFieldContainer[bytes]
    dist_attr: ScanMergeDist
    id: _containers.RepeatedScalarFieldContainer[int]
    forward_op_id: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, inputs: _Optional[_Union[ScanArgs, _Mapping]] = ..., outputs: _Optional[_Union[ScanArgs, _Mapping]] = ..., type: _Optional[_Iterable[bytes]] = ..., attrs: _Optional[_Iterable[bytes]] = ..., struct_name: _Optional[_Iterable[bytes]] = ..., dist_attr: _Optional[_Union[ScanMergeDist, _Mapping]] = ..., id: _Optional[_Iterable[int]] = ..., forward_op_id: _Optional[_Iterable[int]] = ...) -> None: ...

class ScanMergeDist(_message.Message):
    __slots__ = ("process_mesh", "chunk_id")
    PROCESS_MESH_FIELD_NUMBER: _ClassVar[int]
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    process_mesh: _containers.RepeatedScalarFieldContainer[bytes]
    chunk_id: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, process_mesh: _Optional[_Iterable[bytes]] = ..., chunk_id: _Optional[_Iterable[int]] = ...) -> None: ...

class ScanProbe(_message.Message):
    __slots__ = ("dist_attr", "id", "forward_op_id")
    DIST_ATTR_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    FORWARD_OP_ID_FIELD_NUMBER: _ClassVar[int]
    dist_attr: ScanProbeDist
    id: _containers.RepeatedScalarFieldContainer[bytes]
    forward_op_id: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, dist_attr: _Optional[_Union[ScanProbeDist, _Mapping]] = ..., id: _Optional[_Iterable[bytes]] = ..., forward_op_id: _Optional[_Iterable[bytes]] = ...) -> None: ...

class ScanProbeDist(_message.Message):
    __slots__ = ("chunk_id",)
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    chunk_id: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, chunk_id: _Optional[_Iterable[bytes]] = ...) -> None: ...

class SlotOp(_message.Message):
    __slots__ = ("inputs", "outputs")
    class Var(_message.Message):
        __slots__ = ("parameter", "arguments")
        PARAMETER_FIELD_NUMBER: _ClassVar[int]
        ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
        parameter: bytes
        arguments: _containers.RepeatedScalarFieldContainer[bytes]
        def __init__(self, parameter: _Optional[bytes] = ..., arguments: _Optional[_Iterable[bytes]] = ...) -> None: ...
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    inputs: _containers.RepeatedCompositeFieldContainer[SlotOp.Var]
    outputs: _containers.RepeatedCompositeFieldContainer[SlotOp.Var]
    def __init__(self, inputs: _Optional[_Iterable[_Union[SlotOp.Var, _Mapping]]] = ..., outputs: _Optional[_Iterable[_Union[SlotOp.Var, _Mapping]]] = ...) -> None: ...

class MeshMergeTensors(_message.Message):
    __slots__ = ("process_mesh",)
    PROCESS_MESH_FIELD_NUMBER: _ClassVar[int]
    process_mesh: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, process_mesh: _Optional[_Iterable[bytes]] = ...) -> None: ...

class TensorDistRun(_message.Message):
    __slots__ = ("ops",)
    OPS_FIELD_NUMBER: _ClassVar[int]
    ops: TensorDistOp
    def __init__(self, ops: _Optional[_Union[TensorDistOp, _Mapping]] = ...) -> None: ...

class TensorDistOp(_message.Message):
    __slots__ = ("dist_attr",)
    DIST_ATTR_FIELD_NUMBER: _ClassVar[int]
    dist_attr: TensorDistSides
    def __init__(self, dist_attr: _Optional[_Union[TensorDistSides, _Mapping]] = ...) -> None: ...

class TensorDistSides(_message.Message):
    __slots__ = ("input_dist_attrs", "output_dist_attrs")
    INPUT_DIST_ATTRS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_DIST_ATTRS_FIELD_NUMBER: _ClassVar[int]
    input_dist_attrs: GroupEntries
    output_dist_attrs: GroupEntries
    def __init__(self, input_dist_attrs: _Optional[_Union[GroupEntries, _Mapping]] = ..., output_dist_attrs: _Optional[_Union[GroupEntries, _Mapping]] = ...) -> None: ...

class ScanVar(_message.Message):
    __slots__ = ("name", "type", "is_parameter", "dist_attr")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    IS_PARAMETER_FIELD_NUMBER: _ClassVar[int]
    DIST_ATTR_FIELD_NUMBER: _ClassVar[int]
    name: bytes
    type: _containers.RepeatedScalarFieldContainer[bytes]
    is_parameter: bool
    dist_attr: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, name: _Optional[bytes] = ..., type: _Optional[_Iterable[bytes]] = ..., is_parameter: _Optional[bool] = ..., dist_attr: _Optional[_Iterable[bytes]] = ...) -> None: ...

class ScanVarMerge(_message.Message):
    __slots__ = ("name", "is_parameter", "dist_attr")
    NAME_FIELD_NUMBER: _ClassVar[int]
    IS_PARAMETER_FIELD_NUMBER: _ClassVar[int]
    DIST_ATTR_FIELD_NUMBER: _ClassVar[int]
    name: _containers.RepeatedScalarFieldContainer[bytes]
    is_parameter: _containers.RepeatedScalarFieldContainer[int]
    dist_attr: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, name: _Optional[_Iterable[bytes]] = ..., is_parameter: _Optional[_Iterable[int]] = ..., dist_attr: _Optional[_Iterable[bytes]] = ...) -> None: ...

class ScanVarProbe(_message.Message):
    __slots__ = ("is_parameter",)
    IS_PARAMETER_FIELD_NUMBER: _ClassVar[int]
    is_parameter: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, is_parameter: _Optional[_Iterable[bytes]] = ...) -> None: ...

class ScanTensorDist(_message.Message):
    __slots__ = ("process_mesh", "chunk_id")
    PROCESS_MESH_FIELD_NUMBER: _ClassVar[int]
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    process_mesh: _containers.RepeatedScalarFieldContainer[bytes]
    chunk_id: int
    def __init__(self, process_mesh: _Optional[_Iterable[bytes]] = ..., chunk_id: _Optional[int] = ...) -> None: ...

class EditOp(_message.Message):
    __slots__ = ("inputs", "outputs", "type", "attrs", "is_target", "struct_name", "dist_attr", "id", "forward_op_id")
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ATTRS_FIELD_NUMBER: _ClassVar[int]
    IS_TARGET_FIELD_NUMBER: _ClassVar[int]
    STRUCT_NAME_FIELD_NUMBER: _ClassVar[int]
    DIST_ATTR_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    FORWARD_OP_ID_FIELD_NUMBER: _ClassVar[int]
    inputs: _containers.RepeatedScalarFieldContainer[bytes]
    outputs: _containers.RepeatedScalarFieldContainer[bytes]
    type: bytes
    attrs: _containers.RepeatedScalarFieldContainer[bytes]
    is_target: bool
    struct_name: bytes
    dist_attr: EditOpDist
    id: int
    forward_op_id: int
    def __init__(self, inputs: _Optional[_Iterable[bytes]] = ..., outputs: _Optional[_Iterable[bytes]] = ..., type: _Optional[bytes] = ..., attrs: _Optional[_Iterable[bytes]] = ..., is_target: _Optional[bool] = ..., struct_name: _Optional[bytes] = ..., dist_attr: _Optional[_Union[EditOpDist, _Mapping]] = ..., id: _Optional[int] = ..., forward_op_id: _Optional[int] = ...) -> None: ...

class EditOpDist(_message.Message):
    __slots__ = ("input_dist_attrs", "output_dist_attrs", "process_mesh", "impl_type", "impl_idx", "chunk_id")
    INPUT_DIST_ATTRS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_DIST_ATTRS_FIELD_NUMBER: _ClassVar[int]
    PROCESS_MESH_FIELD_NUMBER: _ClassVar[int]
    IMPL_TYPE_FIELD_NUMBER: _ClassVar[int]
    IMPL_IDX_FIELD_NUMBER: _ClassVar[int]
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    input_dist_attrs: _containers.RepeatedCompositeFieldContainer[EditEntry]
    output_dist_attrs: _containers.RepeatedCompositeFieldContainer[EditEntry]
    process_mesh: bytes
    impl_type: bytes
    impl_idx: int
    chunk_id: int
    def __init__(self, input_dist_attrs: _Optional[_Iterable[_Union[EditEntry, _Mapping]]] = ..., output_dist_attrs: _Optional[_Iterable[_Union[EditEntry, _Mapping]]] = ..., process_mesh: _Optional[bytes] = ..., impl_type: _Optional[bytes] = ..., impl_idx: _Optional[int] = ..., chunk_id: _Optional[int] = ...) -> None: ...

class PlainOp(_message.Message):
    __slots__ = ("inputs", "outputs", "type", "attrs", "is_target", "struct_name", "dist_attr", "id", "forward_op_id")
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ATTRS_FIELD_NUMBER: _ClassVar[int]
    IS_TARGET_FIELD_NUMBER: _ClassVar[int]
    STRUCT_NAME_FIELD_NUMBER: _ClassVar[int]
    DIST_ATTR_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    FORWARD_OP_ID_FIELD_NUMBER: _ClassVar[int]
    inputs: _containers.RepeatedScalarFieldContainer[bytes]
    outputs: _containers.RepeatedScalarFieldContainer[bytes]
    type: bytes
    attrs: _containers.RepeatedScalarFieldContainer[bytes]
    is_target: bool
    struct_name: bytes
    dist_attr: bytes
    id: int
    forward_op_id: int
    def __init__(self, inputs: _Optional[_Iterable[bytes]] = ..., outputs: _Optional[_Iterable[bytes]] = ..., type: _Optional[bytes] = ..., attrs: _Optional[_Iterable[bytes]] = ..., is_target: _Optional[bool] = ..., struct_name: _Optional[bytes] = ..., dist_attr: _Optional[bytes] = ..., id: _Optional[int] = ..., forward_op_id: _Optional[int] = ...) -> None: ...

class PlainOps(_message.Message):
    __slots__ = ("ops",)
    OPS_FIELD_NUMBER: _ClassVar[int]
    ops: _containers.RepeatedCompositeFieldContainer[PlainOp]
    def __init__(self, ops: _Optional[_Iterable[_Union[PlainOp, _Mapping]]] = ...) -> None: ...

class DistOnlyOp(_message.Message):
    __slots__ = ("dist_attr",)
    DIST_ATTR_FIELD_NUMBER: _ClassVar[int]
    dist_attr: bytes
    def __init__(self, dist_attr: _Optional[bytes] = ...) -> None: ...

class DistOnlyOps(_message.Message):
    __slots__ = ("ops",)
    OPS_FIELD_NUMBER: _ClassVar[int]
    ops: _containers.RepeatedCompositeFieldContainer[DistOnlyOp]
    def __init__(self, ops: _Optional[_Iterable[_Union[DistOnlyOp, _Mapping]]] = ...) -> None: ...

class TailOp(_message.Message):
    __slots__ = ("id", "forward_op_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    FORWARD_OP_ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    forward_op_id: int
    def __init__(self, id: _Optional[int] = ..., forward_op_id: _Optional[int] = ...) -> None: ...

class TailOps(_message.Message):
    __slots__ = ("ops",)
    OPS_FIELD_NUMBER: _ClassVar[int]
    ops: _containers.RepeatedCompositeFieldContainer[TailOp]
    def __init__(self, ops: _Optional[_Iterable[_Union[TailOp, _Mapping]]] = ...) -> None: ...

class FramedOps(_message.Message):
    __slots__ = ("ops",)
    OPS_FIELD_NUMBER: _ClassVar[int]
    ops: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, ops: _Optional[_Iterable[bytes]] = ...) -> None: ...

class DistViewOps(_message.Message):
    __slots__ = ("ops",)
    OPS_FIELD_NUMBER: _ClassVar[int]
    ops: _containers.RepeatedCompositeFieldContainer[DistViewOp]
    def __init__(self, ops: _Optional[_Iterable[_Union[DistViewOp, _Mapping]]] = ...) -> None: ...

class DistViewOp(_message.Message):
    __slots__ = ("dist_attr",)
    DIST_ATTR_FIELD_NUMBER: _ClassVar[int]
    dist_attr: EditOpDist
    def __init__(self, dist_attr: _Optional[_Union[EditOpDist, _Mapping]] = ...) -> None: ...

class DistGroup(_message.Message):
    __slots__ = ("dist_attr",)
    DIST_ATTR_FIELD_NUMBER: _ClassVar[int]
    dist_attr: DistGroupFields
    def __init__(self, dist_attr: _Optional[_Union[DistGroupFields, _Mapping]] = ...) -> None: ...

class DistGroupFields(_message.Message):
    __slots__ = ("input_dist_attrs", "output_dist_attrs", "process_mesh", "chunk_id")
    INPUT_DIST_ATTRS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_DIST_ATTRS_FIELD_NUMBER: _ClassVar[int]
    PROCESS_MESH_FIELD_NUMBER: _ClassVar[int]
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    input_dist_attrs: GroupEntries
    output_dist_attrs: GroupEntries
    process_mesh: _containers.RepeatedScalarFieldContainer[bytes]
    chunk_id: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, input_dist_attrs: _Optional[_Union[GroupEntries, _Mapping]] = ..., output_dist_attrs: _Optional[_Union[GroupEntries, _Mapping]] = ..., process_mesh: _Optional[_Iterable[bytes]] = ..., chunk_id: _Optional[_Iterable[int]] = ...) -> None: ...

class GroupEntries(_message.Message):
    __slots__ = ("tensor_dist_attr",)
    TENSOR_DIST_ATTR_FIELD_NUMBER: _ClassVar[int]
    tensor_dist_attr: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, tensor_dist_attr: _Optional[_Iterable[bytes]] = ...) -> None: ...

class EditEntry(_message.Message):
    __slots__ = ("name", "tensor_dist_attr")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TENSOR_DIST_ATTR_FIELD_NUMBER: _ClassVar[int]
    name: bytes
    tensor_dist_attr: bytes
    def __init__(self, name: _Optional[bytes] = ..., tensor_dist_attr: _Optional[bytes] = ...) -> None: ...

class EditTensorDist(_message.Message):
    __slots__ = ("process_mesh", "dims_mapping", "batch_dim", "dynamic_dims", "chunk_id")
    PROCESS_MESH_FIELD_NUMBER: _ClassVar[int]
    DIMS_MAPPING_FIELD_NUMBER: _ClassVar[int]
    BATCH_DIM_FIELD_NUMBER: _ClassVar[int]
    DYNAMIC_DIMS_FIELD_NUMBER: _ClassVar[int]
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    process_mesh: bytes
    dims_mapping: _containers.RepeatedScalarFieldContainer[int]
    batch_dim: int
    dynamic_dims: _containers.RepeatedScalarFieldContainer[bool]
    chunk_id: int
    def __init__(self, process_mesh: _Optional[bytes] = ..., dims_mapping: _Optional[_Iterable[int]] = ..., batch_dim: _Optional[int] = ..., dynamic_dims: _Optional[_Iterable[bool]] = ..., chunk_id: _Optional[int] = ...) -> None: ...

class EditVar(_message.Message):
    __slots__ = ("name", "type", "persistable", "need_check_feed", "is_parameter", "stop_gradient", "attrs", "dist_attr")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PERSISTABLE_FIELD_NUMBER: _ClassVar[int]
    NEED_CHECK_FEED_FIELD_NUMBER: _ClassVar[int]
    IS_PARAMETER_FIELD_NUMBER: _ClassVar[int]
    STOP_GRADIENT_FIELD_NUMBER: _ClassVar[int]
    ATTRS_FIELD_NUMBER: _ClassVar[int]
    DIST_ATTR_FIELD_NUMBER: _ClassVar[int]
    name: bytes
    type: bytes
    persistable: bool
    need_check_feed: bool
    is_parameter: bool
    stop_gradient: bool
    attrs: _containers.RepeatedScalarFieldContainer[bytes]
    dist_attr: bytes
    def __init__(self, name: _Optional[bytes] = ..., type: _Optional[bytes] = ..., persistable: _Optional[bool] = ..., need_check_feed: _Optional[bool] = ..., is_parameter: _Optional[bool] = ..., stop_gradient: _Optional[bool] = ..., attrs: _Optional[_Iterable[bytes]] = ..., dist_attr: _Optional[bytes] = ...) -> None: ...
