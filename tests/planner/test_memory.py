"""Memory per stage in bytes: checked against an independent reading of the program.

`params_bytes`, `grads_bytes` and `optimizer_bytes` of every stage are recomputed here
straight from the converted program's protobuf (parameters by the mesh `convert` put
them on, element counts times dtype sizes, the optimizer ops on each stage's mesh),
without vppctl's index or memory model, and compared with what `simulate` reports.
Activation bytes are checked on a hand-built two-layer program whose stash is worked
out by hand, including the -1 rule (first unknown dimension = micro-batch size,
later ones = sequence length) and the in-flight multiplier.

The tests here also cover vppctl/outcomes/memory.py, which has no test file of its own.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import paths
import pytest
from commandline import invoke
from programs import DTYPE_BYTES, Prog

from vppctl.commands import convert_file, simulate_run
from vppctl.convert import ConvertOptions
from vppctl.plan import PlanOptions
from vppctl.planner import SimulateOptions
from vppctl.planner.memory import MemoryOptions, iec, parse_size
from vppctl.program._proto import program_pb2 as pb
from vppctl.program.roles import BACKWARD, FORWARD, LOSS, LOSS_GRAD, OPTIMIZE
from vppctl.sample import SampleOptions, build_sample

ROOT = paths.ROOT


def var_bytes(v: pb.VarDesc) -> int:
    t = v.type.dense_tensor.tensor
    return math.prod(t.dims) * DTYPE_BYTES[t.data_type]


def role(op: pb.OpDesc) -> int:
    return next((a.i for a in op.attrs if a.name == "op_role"), 0)


def independent_static(data: bytes) -> dict[str, list[int]]:
    """Per stage: parameter, gradient and optimizer-state bytes, read from the protobuf."""
    prog = pb.ProgramDesc.FromString(data)
    stage_of = {
        tuple(s.mesh.process_ids): s.stage for s in prog.pipeline_plan.segments
    }  # stage meshes, as the recorded plan names them
    pp = prog.pipeline_plan.pp
    block = prog.blocks[0]
    by_name = {v.name: v for v in block.vars}
    out = {"params": [0] * pp, "grads": [0] * pp, "optimizer": [0] * pp}
    for v in block.vars:
        if v.is_parameter:
            stage = stage_of[tuple(v.dist_attr.process_mesh.process_ids)]
            out["params"][stage] += var_bytes(v)
            out["grads"][stage] += var_bytes(by_name[v.name + "@GRAD"])
    states: dict[int, set[str]] = defaultdict(set)
    for op in block.ops:
        r = role(op)
        if not (r & OPTIMIZE and not r & BACKWARD) or "Param" not in {
            i.parameter for i in op.inputs
        }:
            continue
        stage = stage_of[tuple(op.dist_attr.process_mesh.process_ids)]
        for slot in (*op.inputs, *op.outputs):
            for name in slot.arguments:
                v = by_name[name]
                if v.persistable and not v.is_parameter:
                    states[stage].add(name)
    for stage, names in states.items():
        out["optimizer"][stage] = sum(var_bytes(by_name[n]) for n in names)
    return out


def converted(tmp_path: Path, src: Path, **plan: object) -> Path:
    out = tmp_path / "out.pb"
    convert_file(src, out, ConvertOptions(plan=PlanOptions(**plan)))  # type: ignore[arg-type]
    return out


@pytest.mark.parametrize(
    ("sample", "plan"),
    [
        ("gpt-8l-pp4.pb", {"vpp": 2}),
        ("gpt-8l-pp4.pb", {"vpp": 2, "placement": "v"}),
        ("gpt-12l-pp4-2ranks-sgd.pb", {"vpp": 3}),
        ("gpt-12l-pp4-2ranks-sgd.pb", {"vpp": 2, "split": "balanced", "cost": "flops"}),
    ],
)
def test_static_bytes_per_stage_match_an_independent_reading(
    tmp_path: Path, sample: str, plan: dict[str, object]
) -> None:
    out = converted(tmp_path, ROOT / "samples" / sample, **plan)
    expected = independent_static(out.read_bytes())
    outcome = simulate_run(out, None, SimulateOptions(micro_batches=8, runtime="any"))
    for stages in outcome.memory:  # one per schedule simulated: the same static bytes
        assert [s.params_bytes for s in stages] == expected["params"]
        assert [s.grads_bytes for s in stages] == expected["grads"]
        assert [s.optimizer_bytes for s in stages] == expected["optimizer"]
    assert all(expected["optimizer"])  # every stage has optimizer state


def test_an_unconverted_program_gets_the_bytes_its_conversion_would_have(tmp_path: Path) -> None:
    src = ROOT / "samples" / "gpt-8l-pp4.pb"
    out = converted(tmp_path, src, vpp=2)
    planned = simulate_run(src, None, SimulateOptions(8, PlanOptions(vpp=2))).memory
    as_converted = simulate_run(out, None, SimulateOptions(micro_batches=8)).memory
    assert planned == as_converted


def test_params_are_counted_per_chunk_where_convert_puts_them(tmp_path: Path) -> None:
    out = converted(tmp_path, ROOT / "samples" / "gpt-8l-pp4.pb", vpp=2)
    prog = pb.ProgramDesc.FromString(out.read_bytes())
    stage_of = {tuple(s.mesh.process_ids): s.stage for s in prog.pipeline_plan.segments}
    params: dict[tuple[int, int], int] = defaultdict(int)
    for v in prog.blocks[0].vars:
        if v.is_parameter:
            stage = stage_of[tuple(v.dist_attr.process_mesh.process_ids)]
            params[stage, v.dist_attr.chunk_id] += var_bytes(v)
    stages = simulate_run(out, None, SimulateOptions(micro_batches=8)).memory[-1]
    found = {(s.stage, c.chunk): c.params_bytes for s in stages for c in s.chunks}
    assert found == dict(params)


# -- activations on a program small enough to work out by hand ---------------------


def two_layer_program() -> bytes:
    """x -> [Layer: matmul(w0) -> h0, relu -> a0] -> [Layer_1: matmul(w1) -> h1] -> mean.

    Backward: relu_grad reads a0 (Layer), matmul_grad of Layer_1 reads a0 and w1,
    mean_grad reads h1, matmul_grad of Layer reads x (a feed) and w0. SGD on w0 and
    an Adam-like update with a moment on w1; the learning rate is shared.
    """
    p = Prog(stages=2)
    act = (-1, -1, 8)  # batch, sequence, hidden
    p.var("x", 0, dims=act)
    p.var("w0", 0, param=True, dims=(8, 8))
    p.var("w1", 1, param=True, dims=(8, 8))
    p.msg.blocks[0].vars[-1].type.dense_tensor.tensor.data_type = pb.VarType.FP16
    p.var("h0", 0, dims=act)
    p.var("a0", 0, dims=act)
    p.var("h1", 1, dims=act)
    p.msg.blocks[0].vars[-1].type.dense_tensor.tensor.data_type = pb.VarType.FP16
    p.var("loss", 1, dims=())
    for name, stage, dims in (
        ("loss@GRAD", 1, ()),
        ("h1@GRAD", 1, act),
        ("a0@GRAD", 1, act),
        ("w1@GRAD", 1, (8, 8)),
        ("h0@GRAD", 0, act),
        ("w0@GRAD", 0, (8, 8)),
        ("x@GRAD", 0, act),
        ("lr", 0, (1,)),
        ("w1_moment1", 1, (8, 8)),
    ):
        p.var(name, stage, dims=dims)
    by_name = {v.name: v for v in p.msg.blocks[0].vars}
    by_name["w1@GRAD"].type.dense_tensor.tensor.data_type = pb.VarType.FP16
    by_name["lr"].persistable = True
    by_name["w1_moment1"].persistable = True
    f0 = p.op("matmul_v2", {"X": ["x"], "Y": ["w0"]}, {"Out": ["h0"]}, struct="/M/Layer/", stage=0)
    f1 = p.op("relu", {"X": ["h0"]}, {"Out": ["a0"]}, struct="/M/Layer/Relu/", stage=0)
    f2 = p.op(
        "matmul_v2", {"X": ["a0"], "Y": ["w1"]}, {"Out": ["h1"]}, struct="/M/Layer_1/", stage=1
    )
    f3 = p.op("mean", {"X": ["h1"]}, {"Out": ["loss"]}, role=LOSS, struct="/M/Loss/", stage=1)
    ids = [p.msg.blocks[0].ops[i].id for i in (f0, f1, f2, f3)]
    p.op("fill_constant", {}, {"Out": ["loss@GRAD"]}, role=LOSS_GRAD, stage=1)
    grads = [
        ("mean_grad", {"X": ["h1"], "Out@GRAD": ["loss@GRAD"]}, {"X@GRAD": ["h1@GRAD"]}, 1, 3),
        (
            "matmul_v2_grad",
            {"X": ["a0"], "Y": ["w1"], "Out@GRAD": ["h1@GRAD"]},
            {"X@GRAD": ["a0@GRAD"], "Y@GRAD": ["w1@GRAD"]},
            1,
            2,
        ),
        ("relu_grad", {"Out": ["a0"], "Out@GRAD": ["a0@GRAD"]}, {"X@GRAD": ["h0@GRAD"]}, 0, 1),
        (
            "matmul_v2_grad",
            {"X": ["x"], "Y": ["w0"], "Out@GRAD": ["h0@GRAD"]},
            {"X@GRAD": ["x@GRAD"], "Y@GRAD": ["w0@GRAD"]},
            0,
            0,
        ),
    ]
    for type_, ins, outs, stage, fwd in grads:
        p.op(type_, ins, outs, role=BACKWARD, stage=stage, forward_op_id=ids[fwd])
    p.op(
        "sgd",
        {"Param": ["w0"], "Grad": ["w0@GRAD"], "LearningRate": ["lr"]},
        {"ParamOut": ["w0"]},
        role=OPTIMIZE,
        stage=0,
    )
    p.op(
        "adam",
        {"Param": ["w1"], "Grad": ["w1@GRAD"], "LearningRate": ["lr"], "Moment1": ["w1_moment1"]},
        {"ParamOut": ["w1"], "Moment1Out": ["w1_moment1"]},
        role=OPTIMIZE,
        stage=1,
    )
    assert FORWARD == 0
    return p.bytes()


def test_activation_bytes_of_a_hand_built_two_layer_program(tmp_path: Path) -> None:
    src = tmp_path / "two.pb"
    src.write_bytes(two_layer_program())
    b, s = 3, 5
    opts = SimulateOptions(4, PlanOptions(vpp=1), schedule="1f1b", memory=MemoryOptions(b, s))
    outcome = simulate_run(src, None, opts)
    (stages,) = outcome.memory
    a0, h1 = b * s * 8 * 4, b * s * 8 * 2  # fp32 and fp16 stashes of one micro-batch
    # Layer's segment stashes a0 for relu_grad; Layer_1's stashes a0 (for its matmul_grad)
    # and h1 (for mean_grad, the loss op sits after the last layer: the last segment).
    assert [c.activation_bytes_per_micro_batch for st in stages for c in st.chunks] == [
        a0,
        a0 + h1,
    ]
    # 1F1B at pp 2, m 4: stage 0 holds 2 micro-batches at its peak, stage 1 one.
    assert [st.peak_activation_bytes for st in stages] == [2 * a0, a0 + h1]
    assert [st.params_bytes for st in stages] == [8 * 8 * 4, 8 * 8 * 2]
    assert [st.grads_bytes for st in stages] == [8 * 8 * 4, 8 * 8 * 2]
    # the learning rate (4 bytes) is on both stages; the moment (fp32) only on stage 1
    assert [st.optimizer_bytes for st in stages] == [4, 4 + 8 * 8 * 4]
    assert [st.peak_bytes for st in stages] == [
        256 + 256 + 4 + 2 * a0,
        128 + 128 + 260 + a0 + h1,
    ]
    assert outcome.warnings == ()


def test_later_unknown_dims_without_seq_len_count_as_one_with_a_warning(tmp_path: Path) -> None:
    src = tmp_path / "two.pb"
    src.write_bytes(two_layer_program())
    opts = SimulateOptions(4, PlanOptions(vpp=1), schedule="1f1b", memory=MemoryOptions(2))
    outcome = simulate_run(src, None, opts)
    (stages,) = outcome.memory
    assert stages[0].chunks[0].activation_bytes_per_micro_batch == 2 * 1 * 8 * 4
    assert any("pass --seq-len" in w for w in outcome.warnings)


def test_the_memory_table_fits_80_columns_and_names_the_assumptions(tmp_path) -> None:
    src = tmp_path / "p.pb"
    src.write_bytes(build_sample(SampleOptions(layers=8, pp=4, hidden=64, vocab=1000)))
    args = ["simulate", str(src), "--vpp", "2", "-m", "8", "--micro-batch-size", "4"]
    result = invoke(*args, "--seq-len", "128", env={"COLUMNS": "80"})
    text = result.stdout
    assert "memory per stage (micro-batch size 4, seq len 128):" in text
    table = text.split("memory per stage")[1].splitlines()[1:8]
    assert all(len(line) <= 80 for line in table) and "…" not in "".join(table)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("80GiB", 80 << 30),
        ("80 GB", 80 * 10**9),
        ("512MiB", 512 << 20),
        ("1.5TiB", int(1.5 * (1 << 40))),
        ("1000", 1000),
        ("64kb", 64_000),
    ],
)
def test_sizes_parse_with_iec_and_si_units(text: str, value: int) -> None:
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "GiB", "-1GiB", "lots", "1.5.2GB", "nanGB", "infGiB"])
def test_bad_sizes_are_refused(text: str) -> None:
    assert parse_size(text) is None


def test_iec_units_for_people() -> None:
    assert iec(1536) == "1.5 KiB" and iec(80 << 30) == "80.0 GiB" and iec(12) == "12 B"
