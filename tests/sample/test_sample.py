"""`vppctl sample`: a GPT-like training program annotated for plain PP.

`vppctl sample --layers 96 --pp 8` gives a program where every op and var is
annotated, grad ops carry `forward_op_id`, and each decoder layer has the same op
pattern; layer i is on stage i*P//N, the embedding on stage 0, head and loss on
the last stage, backward ops on their forward op's mesh, optimizer ops on their
parameter's mesh. The output is deterministic and canonical, and `--layers 10000`
(about 1M ops) finishes in well under a minute.

The tests here also cover vppctl/sample/model.py and vppctl/sample/size.py, which have no
test file of their own.
"""

from __future__ import annotations

import re
import time
from collections import Counter, defaultdict
from functools import cached_property
from pathlib import Path

import pytest
from commandline import invoke
from google.protobuf import text_format

from vppctl.program._proto import program_pb2 as pb
from vppctl.program.roles import BACKWARD, FORWARD, LOSS, LOSS_GRAD, OPTIMIZE
from vppctl.sample import SampleOptions, build_sample

LAYER_ROOT = re.compile(r"^/GPTModel/(DecoderLayer(?:_(\d+))?)/")
SMALL = ["--hidden", "64", "--vocab", "1000"]


def run_sample(tmp_path: Path, *args: str, name: str = "prog.pb") -> bytes:
    out = tmp_path / name
    result = invoke("sample", *args, "-o", str(out))
    assert result.stdout == ""
    return out.read_bytes()


class Sample:
    """A generated program read back with program.proto, with the lookups the tests need."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.msg = pb.ProgramDesc.FromString(data)
        self.block = self.msg.blocks[0]
        self.ops = list(self.block.ops)
        self.vars = {v.name: v for v in self.block.vars}

    @cached_property
    def meshes(self) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
        return [_mesh_key(m) for m in self.msg.process_meshes]

    @cached_property
    def all_ranks(self) -> set[int]:
        return {r for m in self.msg.process_meshes for r in m.process_ids}

    @cached_property
    def stage_meshes(self) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
        """process_meshes without a global mesh covering all ranks."""
        n = len(self.all_ranks)
        return [m for m in self.meshes if len(m[1]) < n or len(self.meshes) == 1]

    def stage_of_mesh(self, mesh: pb.ProcessMesh) -> int:
        """Stage index of a mesh; -1 for the global mesh."""
        key = _mesh_key(mesh)
        return self.stage_meshes.index(key) if key in self.stage_meshes else -1

    def stage(self, op: pb.OpDesc) -> int:
        return self.stage_of_mesh(op.dist_attr.process_mesh)

    def var_stage(self, name: str) -> int:
        return self.stage_of_mesh(self.vars[name].dist_attr.process_mesh)

    @cached_property
    def by_id(self) -> dict[int, pb.OpDesc]:
        return {op.id: op for op in self.ops}

    def of_role(self, *roles: int) -> list[pb.OpDesc]:
        return [op for op in self.ops if role(op) in roles]

    @cached_property
    def forward(self) -> list[pb.OpDesc]:
        return self.of_role(FORWARD, LOSS)

    @cached_property
    def params(self) -> list[str]:
        return [v.name for v in self.block.vars if v.is_parameter]

    def layer_of(self, op: pb.OpDesc) -> int | None:
        """Decoder layer index of a forward op (by its struct name), else None."""
        m = LAYER_ROOT.match(op.struct_name)
        if m is None:
            return None
        return int(m.group(2) or 0)

    @cached_property
    def position(self) -> dict[int, int]:
        """Op id -> index in the block."""
        return {op.id: i for i, op in enumerate(self.ops)}

    @cached_property
    def _producers(self) -> dict[str, pb.OpDesc]:
        """Var name -> the first op that writes it."""
        out: dict[str, pb.OpDesc] = {}
        for op in self.ops:
            for v in op.outputs:
                for n in v.arguments:
                    out.setdefault(n, op)
        return out

    def producer(self, name: str) -> pb.OpDesc:
        assert name in self._producers, f"nothing writes {name}"
        return self._producers[name]


def _mesh_key(m: pb.ProcessMesh) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return tuple(m.shape), tuple(m.process_ids)


def role(op: pb.OpDesc) -> int:
    roles = [a.i for a in op.attrs if a.name == "op_role"]
    assert len(roles) == 1, op.type
    return roles[0]


def attr(op: pb.OpDesc, name: str) -> pb.OpDesc.Attr | None:
    return next((a for a in op.attrs if a.name == name), None)


def slot(op: pb.OpDesc, name: str, *, out: bool = False) -> list[str]:
    for v in op.outputs if out else op.inputs:
        if v.parameter == name:
            return list(v.arguments)
    return []


def arguments(op: pb.OpDesc) -> list[str]:
    return [n for v in (*op.inputs, *op.outputs) for n in v.arguments]


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Sample:
    """The spec's sample: `vppctl sample --layers 96 --pp 8`."""
    return Sample(run_sample(tmp_path_factory.mktemp("big"), "--layers", "96", "--pp", "8"))


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Sample:
    return Sample(run_sample(tmp_path_factory.mktemp("small"), "--layers", "6", "--pp", "3"))


# -- annotation ------------------------------------------------------------------


def test_every_op_and_var_has_a_mesh_and_chunk_0(big: Sample) -> None:
    meshes = set(big.meshes)
    for op in big.ops:
        assert op.dist_attr.HasField("process_mesh"), op.type
        assert _mesh_key(op.dist_attr.process_mesh) in meshes, op.type
        assert op.dist_attr.HasField("chunk_id") and op.dist_attr.chunk_id == 0, op.type
    for v in big.block.vars:
        assert v.dist_attr.HasField("process_mesh"), v.name
        assert _mesh_key(v.dist_attr.process_mesh) in meshes, v.name
        assert v.dist_attr.HasField("chunk_id") and v.dist_attr.chunk_id == 0, v.name
        assert len(v.dist_attr.dims_mapping) == len(v.type.dense_tensor.tensor.dims), v.name


def test_every_name_an_op_uses_is_a_declared_var(big: Sample) -> None:
    used = {n for op in big.ops for n in arguments(op)}
    assert used <= set(big.vars)
    assert len(big.vars) == len(big.block.vars), "var names are unique"


def test_pp_stage_meshes_in_stage_order(big: Sample) -> None:
    assert big.stage_meshes == [((1,), (s,)) for s in range(8)]
    # Any other mesh is the global one, covering all ranks.
    for m in big.meshes:
        assert m in big.stage_meshes or set(m[1]) == set(range(8))


def test_op_ids_are_unique(big: Sample) -> None:
    assert len(big.by_id) == len(big.ops)
    assert all(op.HasField("id") for op in big.ops)


# -- forward, struct names and layout ----------------------------------------------


def test_struct_names_follow_paddles_layer_naming(big: Sample) -> None:
    roots = []
    for op in big.forward:
        m = LAYER_ROOT.match(op.struct_name)
        if m and m.group(1) not in roots:
            roots.append(m.group(1))
    assert roots == ["DecoderLayer"] + [f"DecoderLayer_{i}" for i in range(1, 96)]
    # Every struct name is a path of class names; `_k` counts calls of one class
    # under one parent, so C_k only exists next to C, C_1, ..., C_{k-1}.
    children: dict[str, set[str]] = defaultdict(set)
    for op in big.forward:
        path = op.struct_name
        assert path.startswith("/") and path.endswith("/"), path
        parts = path.strip("/").split("/")
        assert all(re.fullmatch(r"[A-Z][A-Za-z0-9]*?(_[1-9]\d*)?", p) for p in parts), path
        for i, part in enumerate(parts):
            children["/".join(parts[:i])].add(part)
    for parent, names in children.items():
        for name in names:
            base, _, k = name.rpartition("_")
            if base and k.isdigit():
                previous = base if k == "1" else f"{base}_{int(k) - 1}"
                assert previous in names, f"{parent}/{name} without {previous}"


def test_ops_made_outside_a_layer_have_struct_name_slash(big: Sample) -> None:
    outside = big.of_role(BACKWARD, LOSS_GRAD, OPTIMIZE)
    assert outside
    assert {op.struct_name for op in outside} == {"/"}


def test_forward_has_the_gpt_op_sequence(small: Sample) -> None:
    types = [op.type for op in small.forward]
    assert types[0] == "lookup_table_v2"
    assert types[-2:] == ["softmax_with_cross_entropy", "mean"]
    layer = [op.type for op in small.forward if small.layer_of(op) == 2]
    # The spec's decoder layer, in order (other ops, e.g. dropout, may sit between).
    expected = [
        "layer_norm",
        "matmul_v2",
        "elementwise_add",
        "split",
        "scale",
        "matmul_v2",
        "softmax",
        "matmul_v2",
        "matmul_v2",
        "elementwise_add",
        "elementwise_add",
        "layer_norm",
        "matmul_v2",
        "elementwise_add",
        "gelu",
        "matmul_v2",
        "elementwise_add",
        "elementwise_add",
    ]
    it = iter(layer)
    assert all(t in it for t in expected), layer
    assert layer[-1] == "elementwise_add"  # the residual add ends the layer


def test_every_decoder_layer_has_the_same_op_pattern(big: Sample) -> None:
    """Forward (type, role, path inside the layer) and backward (type, role), layer by layer."""
    fwd: dict[int, list[tuple[str, int, str]]] = defaultdict(list)
    for op in big.forward:
        k = big.layer_of(op)
        if k is not None:
            inner = LAYER_ROOT.sub("", op.struct_name)
            fwd[k].append((op.type, role(op), inner))
    bwd: dict[int, list[tuple[str, int]]] = defaultdict(list)
    current = None
    for op in big.of_role(BACKWARD):
        if op.HasField("forward_op_id"):
            current = big.layer_of(big.by_id[op.forward_op_id])
        if current is not None:  # sum ops join the layer of the grad op before them
            bwd[current].append((op.type, role(op)))
    assert sorted(fwd) == sorted(bwd) == list(range(96))
    assert len(fwd[0]) >= 18
    assert any(t == "sum" for t, _ in bwd[0])
    for k in range(1, 96):
        assert fwd[k] == fwd[0], f"DecoderLayer_{k} forward differs"
        assert bwd[k] == bwd[0], f"DecoderLayer_{k} backward differs"


def test_a_layers_forward_ops_are_contiguous_and_in_layer_order(big: Sample) -> None:
    seq = [big.layer_of(op) for op in big.forward]
    layers = [k for k in seq if k is not None]
    assert layers == sorted(layers)
    first, last = seq.index(0), len(seq) - 1 - seq[::-1].index(95)
    assert None not in seq[first : last + 1]


def test_blocked_layout_layer_i_on_stage_i_times_p_over_n(big: Sample) -> None:
    for op in big.forward:
        k = big.layer_of(op)
        if k is not None:
            assert big.stage(op) == k * 8 // 96, op.struct_name


def test_embedding_on_stage_0_head_and_loss_on_the_last_stage(big: Sample) -> None:
    before = [op for op in big.forward if op.struct_name.startswith("/GPTModel/GPTEmbeddings/")]
    after_layers = big.forward[
        len(big.forward) - [big.layer_of(op) for op in big.forward][::-1].index(95) :
    ]
    assert before and {big.stage(op) for op in before} == {0}
    assert [op.type for op in before][:2] == ["lookup_table_v2", "lookup_table_v2"]
    assert after_layers and {big.stage(op) for op in after_layers} == {7}
    assert after_layers[-1].type == "mean"


def test_loss_op_role_256_and_loss_grad_fill_constant_role_257(big: Sample) -> None:
    (loss,) = big.of_role(LOSS)
    (loss_grad,) = big.of_role(LOSS_GRAD)
    assert loss.type == "mean" and loss is big.forward[-1]
    assert loss_grad.type == "fill_constant"
    assert slot(loss_grad, "Out", out=True) == [slot(loss, "Out", out=True)[0] + "@GRAD"]
    assert big.position[loss_grad.id] == big.position[loss.id] + 1
    assert big.stage(loss_grad) == big.stage(loss) == 7


# -- backward ---------------------------------------------------------------------


def test_one_grad_op_per_forward_op_in_reverse_order(big: Sample) -> None:
    grads = [op for op in big.of_role(BACKWARD) if op.type != "sum"]
    assert all(op.HasField("forward_op_id") for op in grads)
    assert [op.forward_op_id for op in grads] == [op.id for op in reversed(big.forward)]
    for op in grads:
        assert op.type == big.by_id[op.forward_op_id].type + "_grad"
        assert role(big.by_id[op.forward_op_id]) in (FORWARD, LOSS)


def test_backward_ops_are_on_their_forward_ops_mesh(big: Sample) -> None:
    for op in big.ops:
        if op.HasField("forward_op_id"):
            fwd = big.by_id[op.forward_op_id]
            assert _mesh_key(op.dist_attr.process_mesh) == _mesh_key(fwd.dist_attr.process_mesh)


def test_grad_names_are_paddles(big: Sample) -> None:
    """A grad op's `S@GRAD` slot names the forward op's `S` vars (those that need a
    gradient) as `X@GRAD`, or `X@GRAD@RENAME@block0@k` when X has several consumers."""
    rename = re.compile(r"^(.*)@GRAD@RENAME@block0@\d+$")
    for op in big.ops:
        if not op.HasField("forward_op_id"):
            continue
        fwd = big.by_id[op.forward_op_id]
        for v in op.outputs:
            assert v.parameter.endswith("@GRAD"), v.parameter
            bases = []
            for g in v.arguments:
                m = rename.match(g)
                assert m or g.endswith("@GRAD"), g
                bases.append(m.group(1) if m else g.removesuffix("@GRAD"))
            wanted = slot(fwd, v.parameter.removesuffix("@GRAD"))
            assert bases == [n for n in wanted if not big.vars[n].stop_gradient], op.type
        # and it reads the forward op's outputs' gradients
        for v in fwd.outputs:
            assert slot(op, v.parameter + "@GRAD") == [n + "@GRAD" for n in v.arguments]


def test_sum_ops_add_up_several_gradient_contributions(big: Sample) -> None:
    consumers = Counter(
        n
        for op in big.forward
        for v in op.inputs
        for n in v.arguments
        if not big.vars[n].stop_gradient
    )
    shared = {n for n, c in consumers.items() if c > 1}
    sums = {slot(op, "Out", out=True)[0]: op for op in big.of_role(BACKWARD) if op.type == "sum"}
    assert shared, "the residual stream feeds several ops"
    assert set(sums) == {n + "@GRAD" for n in shared}
    written = Counter(n for op in big.of_role(BACKWARD) for v in op.outputs for n in v.arguments)
    for n in shared:
        op = sums[n + "@GRAD"]
        assert slot(op, "X") == [f"{n}@GRAD@RENAME@block0@{k}" for k in range(consumers[n])]
        assert all(written[x] == 1 for x in slot(op, "X"))
        # Every contribution is written before the sum that adds it up.
        at = big.position[op.id]
        assert all(big.position[big.producer(x).id] < at for x in slot(op, "X"))
        assert written[n + "@GRAD"] == 1


# -- parameters and optimizer --------------------------------------------------------


def test_parameters_are_persistable_and_marked_as_parameters(big: Sample) -> None:
    assert len(big.params) > 96 * 4
    for name in big.params:
        v = big.vars[name]
        assert v.persistable and v.is_parameter, name
        assert v.type.type == pb.VarType.DENSE_TENSOR
        assert v.type.dense_tensor.tensor.data_type == pb.VarType.FP32
        assert all(d > 0 for d in v.type.dense_tensor.tensor.dims), name
    fed = {n for op in big.forward for n in arguments(op)}
    assert set(big.params) <= fed


def test_data_vars_are_int64_feeds(big: Sample) -> None:
    ids = slot(big.forward[0], "Ids")[0]
    v = big.vars[ids]
    assert v.type.dense_tensor.tensor.data_type == pb.VarType.INT64
    assert v.need_check_feed and v.stop_gradient and not v.persistable


def test_adamw_updates_each_parameter_once_on_its_mesh(big: Sample) -> None:
    updates = [op for op in big.of_role(OPTIMIZE) if op.type == "adamw"]
    assert sorted(slot(op, "Param")[0] for op in updates) == sorted(big.params)
    for op in updates:
        p = slot(op, "Param")[0]
        assert {v.parameter for v in op.inputs} >= {
            "Param",
            "Grad",
            "LearningRate",
            "Moment1",
            "Moment2",
            "Beta1Pow",
            "Beta2Pow",
        }
        assert slot(op, "ParamOut", out=True) == [p]
        assert big.stage(op) == big.var_stage(p) >= 0
        for acc in ("Moment1", "Moment2", "Beta1Pow", "Beta2Pow"):
            assert big.var_stage(slot(op, acc)[0]) == big.var_stage(p)
            assert big.vars[slot(op, acc)[0]].persistable
        (lr,) = slot(op, "LearningRate")
        assert big.vars[lr].persistable


def test_optimizer_ops_on_their_parameters_mesh(big: Sample) -> None:
    """An optimizer op working on one parameter (its gradient, clipping, update) is on
    that parameter's mesh; the ones combining all of them (global norm) on all ranks."""
    params = set(big.params)
    per_param = 0
    for op in big.of_role(OPTIMIZE):
        assert op.struct_name == "/"
        touched = {n.split("@")[0] for v in op.inputs for n in v.arguments} & params
        assert len(touched) <= 1, op.type
        if touched:
            per_param += 1
            assert big.stage(op) == big.var_stage(touched.pop()), op.type
        else:
            assert set(op.dist_attr.process_mesh.process_ids) == big.all_ranks, op.type
    assert per_param >= len(params)


def test_parameter_gradients_are_clipped_before_the_update(big: Sample) -> None:
    for op in big.of_role(OPTIMIZE):
        if op.type == "adamw":
            (g,) = slot(op, "Grad")
            assert role(big.producer(g)) == OPTIMIZE, "the clipped gradient"
    assert any(op.type == "squared_l2_norm" for op in big.ops)


# -- options ---------------------------------------------------------------------------


def test_ranks_per_stage_gives_stage_meshes_of_k_ranks(tmp_path: Path) -> None:
    s = Sample(run_sample(tmp_path, "--layers", "4", "--pp", "2", "--ranks-per-stage", "3"))
    assert s.stage_meshes == [((3,), (0, 1, 2)), ((3,), (3, 4, 5))]
    assert s.all_ranks == set(range(6))
    assert {s.stage(op) for op in s.ops} <= {-1, 0, 1}
    assert {s.stage(op) for op in s.forward} == {0, 1}


@pytest.mark.parametrize(
    ("layers", "pp", "vpp", "stages"),
    [
        (8, 2, 2, [0, 0, 1, 1, 0, 0, 1, 1]),
        (8, 2, 4, [0, 1, 0, 1, 0, 1, 0, 1]),
        (12, 3, 2, [0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2]),
    ],
)
def test_interleaved_layout_puts_segments_round_robin_with_chunk_0(
    tmp_path: Path, layers: int, pp: int, vpp: int, stages: list[int]
) -> None:
    s = Sample(
        run_sample(
            tmp_path,
            *("--layers", str(layers), "--pp", str(pp), "--layout", "interleaved"),
            *("--vpp", str(vpp), *SMALL),
        )
    )
    got: dict[int, set[int]] = defaultdict(set)
    for op in s.forward:
        k = s.layer_of(op)
        if k is not None:
            got[k].add(s.stage(op))
    assert [got[k] for k in range(layers)] == [{st} for st in stages]
    assert {op.dist_attr.chunk_id for op in s.ops} == {0}
    assert {v.dist_attr.chunk_id for v in s.block.vars} == {0}
    assert {s.stage(op) for op in s.forward if s.layer_of(op) is None} == {0, pp - 1}


def test_no_backward_writes_only_the_forward(tmp_path: Path) -> None:
    full = Sample(run_sample(tmp_path, "--layers", "4", "--pp", "2", *SMALL, name="full.pb"))
    s = Sample(run_sample(tmp_path, "--layers", "4", "--pp", "2", "--no-backward", *SMALL))
    assert {role(op) for op in s.ops} == {FORWARD, LOSS}
    assert not any(op.type.endswith("_grad") or op.HasField("forward_op_id") for op in s.ops)
    assert not any("@GRAD" in name for name in s.vars)
    strip = [(op.type, op.struct_name, list(op.inputs), list(op.outputs)) for op in s.forward]
    assert strip == [
        (op.type, op.struct_name, list(op.inputs), list(op.outputs)) for op in full.forward
    ]


def test_optimizer_sgd(tmp_path: Path) -> None:
    s = Sample(run_sample(tmp_path, "--layers", "4", "--pp", "2", "--optimizer", "sgd", *SMALL))
    updates = [op for op in s.of_role(OPTIMIZE) if slot(op, "Param")]
    assert {op.type for op in updates} == {"sgd"}
    assert sorted(slot(op, "Param")[0] for op in updates) == sorted(s.params)
    for op in updates:
        assert {v.parameter for v in op.inputs} == {"Param", "Grad", "LearningRate"}
        assert s.stage(op) == s.var_stage(slot(op, "Param")[0])
    assert not any("moment" in name.lower() for name in s.vars)


def test_optimizer_none_keeps_the_backward_and_drops_every_optimizer_op(tmp_path: Path) -> None:
    s = Sample(run_sample(tmp_path, "--layers", "4", "--pp", "2", "--optimizer", "none", *SMALL))
    assert s.of_role(OPTIMIZE) == []
    assert s.of_role(BACKWARD) and s.of_role(LOSS_GRAD)


def test_no_grad_clip_feeds_raw_gradients_to_the_optimizer(tmp_path: Path) -> None:
    s = Sample(run_sample(tmp_path, "--layers", "4", "--pp", "2", "--no-grad-clip", *SMALL))
    updates = [op for op in s.of_role(OPTIMIZE)]
    assert {op.type for op in updates} == {"adamw"}
    assert len(updates) == len(s.params)
    for op in updates:
        assert slot(op, "Grad") == [slot(op, "Param")[0] + "@GRAD"]


def test_callstack_puts_an_op_callstack_on_every_op(tmp_path: Path) -> None:
    plain = Sample(run_sample(tmp_path, "--layers", "2", "--pp", "2", *SMALL, name="a.pb"))
    s = Sample(run_sample(tmp_path, "--layers", "2", "--pp", "2", "--callstack", *SMALL))
    assert not any(attr(op, "op_callstack") for op in plain.ops)
    for op in s.ops:
        a = attr(op, "op_callstack")
        assert a is not None and a.type == pb.STRINGS and len(a.strings) > 0, op.type
    assert len(s.data) > 2 * len(plain.data)


def test_hidden_and_vocab_size_the_embedding(tmp_path: Path) -> None:
    s = Sample(
        run_sample(tmp_path, "--layers", "2", "--pp", "2", "--hidden", "128", "--vocab", "512")
    )
    (w,) = slot(s.forward[0], "W")
    assert list(s.vars[w].type.dense_tensor.tensor.dims) == [512, 128]


def test_text_output_by_extension(tmp_path: Path) -> None:
    args = ("--layers", "2", "--pp", "2", *SMALL)
    binary = run_sample(tmp_path, *args)
    text = run_sample(tmp_path, *args, name="prog.pbtxt")
    parsed = text_format.Parse(text.decode("utf-8"), pb.ProgramDesc())
    assert parsed.SerializeToString() == binary


# -- determinism and canonical bytes ----------------------------------------------------

VARIANTS = {
    "blocked": ("--layers", "6", "--pp", "3"),
    "ranks": ("--layers", "4", "--pp", "2", "--ranks-per-stage", "2"),
    "interleaved": ("--layers", "8", "--pp", "2", "--layout", "interleaved", "--vpp", "2"),
    "no-backward": ("--layers", "4", "--pp", "2", "--no-backward"),
    "sgd": ("--layers", "4", "--pp", "2", "--optimizer", "sgd"),
    "none": ("--layers", "4", "--pp", "2", "--optimizer", "none"),
    "no-clip": ("--layers", "4", "--pp", "2", "--no-grad-clip"),
    "callstack": ("--layers", "2", "--pp", "2", "--callstack"),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_output_is_deterministic_and_canonical(tmp_path: Path, variant: str) -> None:
    args = (*VARIANTS[variant], *SMALL)
    first = run_sample(tmp_path, *args, name="a.pb")
    second = run_sample(tmp_path, *args, name="b.pb")
    assert first == second
    assert pb.ProgramDesc.FromString(first).SerializeToString() == first


def test_library_and_cli_write_the_same_bytes(tmp_path: Path) -> None:
    data = build_sample(SampleOptions(layers=4, pp=2, hidden=64, vocab=1000))
    assert data == build_sample(SampleOptions(layers=4, pp=2, hidden=64, vocab=1000))
    assert data == run_sample(tmp_path, "--layers", "4", "--pp", "2", *SMALL)


def test_the_big_sample_is_canonical(big: Sample) -> None:
    assert big.msg.SerializeToString() == big.data


# -- bad options -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["--layers", "0", "--pp", "2"],
        ["--layers", "-3", "--pp", "2"],
        ["--layers", "4", "--pp", "0"],
        ["--layers", "3", "--pp", "4"],
        ["--layers", "4", "--pp", "2", "--ranks-per-stage", "0"],
        ["--layers", "6", "--pp", "2", "--layout", "interleaved", "--vpp", "2"],
        ["--layers", "4", "--pp", "2", "--layout", "zigzag"],
        ["--layers", "4", "--pp", "2", "--optimizer", "lamb"],
        ["--layers", "4", "--pp", "2", "--hidden", "100"],
        ["--layers", "4", "--pp", "2", "--hidden", "0"],
        ["--layers", "4", "--pp", "2", "--vocab", "0"],
        ["--layers", "four", "--pp", "2"],
        ["--pp", "2"],
    ],
)
def test_bad_sample_options_exit_2_and_write_nothing(tmp_path: Path, args: list[str]) -> None:
    out = tmp_path / "prog.pb"
    result = invoke("sample", *args, "-o", str(out), exit_code=2)
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    assert "rror" in result.stderr
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


# -- speed ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_million_op_program_takes_well_under_a_minute(tmp_path: Path) -> None:
    from vppctl.program._proto import view_pb2 as view

    out = tmp_path / "big.pb"
    start, cpu = time.perf_counter(), time.process_time()
    result = invoke("sample", "--layers", "10000", "--pp", "8", "-o", str(out), exit_code=None)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert result.exit_code == 0, result.output
    n_ops = len(view.LazyProgram.FromString(out.read_bytes()).blocks[0].ops)
    assert 900_000 <= n_ops <= 1_100_000
    assert elapsed < 30, f"{elapsed:.1f} s ({cpu:.1f} s CPU) for {n_ops} ops"
