"""`vppctl inspect` and `vppctl dump`.

inspect summarises a program: blocks, ops by role, vars, parameters (count and
total elements), stage meshes in order, per stage its layers and op counts, the
chunk ids present, and whether the layout looks like plain PP, interleaved VPP,
or unannotated; `--json` prints one JSON object and nothing else on stdout.
dump prints text format, or converts between binary and text by the output's
extension; `--strip-callstack` drops every op_callstack attr and reports the
bytes saved. Both work on every sample variant and on a converted program.

Expected values are computed here from the program itself (program_pb2), not
from vppctl's index.

The tests here also cover vppctl/summary.py, which has no test file of its own.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import paths
import pytest
from commandline import invoke
from google.protobuf import text_format
from programs import Prog

from vppctl.program._proto import program_pb2 as pb
from vppctl.program.roles import is_forward
from vppctl.report import human_bytes

SMALL = ("--hidden", "64", "--vocab", "1000")
SAMPLES = paths.SAMPLES
LAYER = re.compile(r"^/GPTModel/(DecoderLayer(?:_\d+)?)/")

# name -> `vppctl sample` options
VARIANTS = {
    "blocked": ("--layers", "4", "--pp", "2"),
    "pp3": ("--layers", "6", "--pp", "3"),
    "ranks": ("--layers", "4", "--pp", "2", "--ranks-per-stage", "3"),
    "interleaved": ("--layers", "8", "--pp", "2", "--layout", "interleaved", "--vpp", "2"),
    "no-backward": ("--layers", "4", "--pp", "2", "--no-backward"),
    "sgd": ("--layers", "4", "--pp", "2", "--optimizer", "sgd"),
    "no-optimizer": ("--layers", "4", "--pp", "2", "--optimizer", "none"),
    "no-clip": ("--layers", "4", "--pp", "2", "--no-grad-clip"),
    "callstack": ("--layers", "2", "--pp", "2", "--callstack"),
}
# The JSON's layout token of each variant, and how the table names it.
LAYOUTS = {name: "plain" for name in VARIANTS} | {"interleaved": "interleaved"}
LAYOUT_NAMES = {"plain": "plain PP", "interleaved": "interleaved VPP"}


# A wide terminal, so that summary lines naming long temporary paths do not wrap.
WIDE = {"COLUMNS": "200"}


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every sample variant, plus the blocked one converted to VPP and an unannotated one."""
    d = tmp_path_factory.mktemp("programs")
    out = {}
    for name, args in VARIANTS.items():
        out[name] = d / f"{name}.pb"
        invoke("sample", *args, *SMALL, "-o", out[name], env=WIDE)
    out["converted"] = d / "converted.pb"
    invoke("convert", out["blocked"], "--vpp", "2", "-o", out["converted"], "-q", env=WIDE)
    p = Prog(stages=2, record_meshes=False)
    p.op("matmul_v2", {"X": ["x"], "Y": ["w"]}, {"Out": ["y"]}, struct="/M/Layer/", stage=None)
    p.op("matmul_v2", {"X": ["y"], "Y": ["w"]}, {"Out": ["z"]}, struct="/M/Layer_1/", stage=None)
    p.op("mean", {"X": ["z"]}, {"Out": ["loss"]}, role=256, stage=None, chunk=None)
    for v in p.msg.blocks[0].vars:
        v.ClearField("dist_attr")
    for op in p.msg.blocks[0].ops:
        op.ClearField("dist_attr")
    out["unannotated"] = d / "unannotated.pb"
    out["unannotated"].write_bytes(p.bytes())
    return out


# -- what the program holds, computed independently -----------------------------


@dataclass
class Expected:
    blocks: int
    ops: dict[str, int]
    vars: int
    params: int
    param_elements: int
    stage_meshes: list[list[int]]
    stage_layers: list[list[str]]
    stage_ops: list[dict[str, int]]
    chunks: list[int]


def _role(op: pb.OpDesc) -> int:
    return next((a.i for a in op.attrs if a.name == "op_role"), 0)


def role_kind(role: int) -> str:
    if is_forward(role):
        return "forward"
    if role & 1:
        return "backward"
    return "optimizer" if role & 2 else "other"


def expected(path: Path) -> Expected:
    data = path.read_bytes()
    if path.suffix == ".pbtxt":
        msg = text_format.Parse(data.decode(), pb.ProgramDesc())
    else:
        msg = pb.ProgramDesc.FromString(data)
    ops = [op for b in msg.blocks for op in b.ops]
    vars_ = [v for b in msg.blocks for v in b.vars]
    params = [v for v in vars_ if v.is_parameter]
    ranks = {r for m in msg.process_meshes for r in m.process_ids}
    stages = [list(m.process_ids) for m in msg.process_meshes if len(m.process_ids) < len(ranks)]
    if len(msg.process_meshes) == 1:
        stages = [list(msg.process_meshes[0].process_ids)]
    layers: list[list[str]] = [[] for _ in stages]
    stage_ops = [dict.fromkeys(("forward", "backward", "optimizer", "other"), 0) for _ in stages]
    for op in msg.blocks[0].ops:
        ids = list(op.dist_attr.process_mesh.process_ids)
        if ids not in stages:
            continue
        s = stages.index(ids)
        stage_ops[s][role_kind(_role(op))] += 1
        m = LAYER.match(op.struct_name)
        if m and role_kind(_role(op)) == "forward" and m.group(1) not in layers[s]:
            layers[s].append(m.group(1))
    return Expected(
        blocks=len(msg.blocks),
        ops=dict(Counter(role_kind(_role(op)) for op in ops)),
        vars=len(vars_),
        params=len(params),
        param_elements=sum(math.prod(v.type.dense_tensor.tensor.dims) for v in params),
        stage_meshes=stages,
        stage_layers=layers,
        stage_ops=stage_ops,
        chunks=sorted({op.dist_attr.chunk_id for op in ops if op.dist_attr.HasField("chunk_id")}),
    )


def inspect_json(path: Path, *extra: str) -> dict:  # type: ignore[type-arg]
    result = invoke("inspect", path, "--json", *extra, env=WIDE)
    return json.loads(result.stdout)  # fails if stdout holds anything but the JSON


# -- inspect --json ------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_inspect_json_counts_what_the_program_holds(programs: dict[str, Path], name: str) -> None:
    want = expected(programs[name])
    got = inspect_json(programs[name], "--seg-method", "DecoderLayer")
    assert got["blocks"] == want.blocks
    assert got["ops"]["total"] == sum(want.ops.values())
    assert {k: got["ops"].get(k, 0) for k in want.ops} == want.ops
    assert got["vars"] == want.vars
    assert got["params"] == {"count": want.params, "elements": want.param_elements}
    assert got["stage_meshes"] == want.stage_meshes
    assert [s["stage"] for s in got["stages"]] == list(range(len(want.stage_meshes)))
    assert [s["mesh"] for s in got["stages"]] == want.stage_meshes
    assert [s["layers"] for s in got["stages"]] == want.stage_layers
    assert [{k: s["ops"].get(k, 0) for k in w} for s, w in zip(got["stages"], want.stage_ops)] == (
        want.stage_ops
    )
    assert got["chunks"] == want.chunks == [0]
    assert got["layout"] == LAYOUTS[name]


def test_inspect_json_puts_blocked_layers_on_their_stages(programs: dict[str, Path]) -> None:
    got = inspect_json(programs["pp3"], "--seg-method", "DecoderLayer")
    assert [s["layers"] for s in got["stages"]] == [
        ["DecoderLayer", "DecoderLayer_1"],
        ["DecoderLayer_2", "DecoderLayer_3"],
        ["DecoderLayer_4", "DecoderLayer_5"],
    ]
    assert got["stage_meshes"] == [[0], [1], [2]]


def test_inspect_json_of_ranks_per_stage_meshes(programs: dict[str, Path]) -> None:
    got = inspect_json(programs["ranks"])
    assert got["stage_meshes"] == [[0, 1, 2], [3, 4, 5]]


def test_inspect_json_of_a_converted_program_shows_vpp_and_the_plan(
    programs: dict[str, Path],
) -> None:
    got = inspect_json(programs["converted"], "--seg-method", "DecoderLayer")
    want = expected(programs["converted"])
    assert got["layout"] == "interleaved"
    assert got["chunks"] == want.chunks == [0, 1]
    assert got["plan"]["pp"] == 2 and got["plan"]["vpp"] == 2
    assert [s["layers"] for s in got["stages"]] == want.stage_layers
    assert [s["chunks"] for s in got["stages"]] == [[0, 1], [0, 1]]
    assert got["ops"]["total"] == sum(want.ops.values())


def test_inspect_json_of_a_program_without_meshes_is_unannotated(
    programs: dict[str, Path],
) -> None:
    got = inspect_json(programs["unannotated"])
    assert got["layout"] == "unannotated"
    assert got["stage_meshes"] == []
    assert got["chunks"] == []
    assert got["ops"]["total"] == 3


def test_inspect_json_plan_is_null_before_conversion(programs: dict[str, Path]) -> None:
    assert inspect_json(programs["blocked"])["plan"] is None


def test_inspect_json_writes_nothing_to_stderr(programs: dict[str, Path]) -> None:
    result = invoke("inspect", programs["callstack"], "--json", env=WIDE)
    assert result.stderr == ""
    assert result.stdout.strip().startswith("{") and result.stdout.strip().endswith("}")


# -- inspect as a table ----------------------------------------------------------------


def _line(text: str, word: str) -> str:
    lines = [ln for ln in text.splitlines() if word in ln.lower()]
    assert lines, f"no line mentions {word!r}:\n{text}"
    return lines[0]


def _numbers(line: str) -> list[int]:
    return [int(n) for n in re.findall(r"(?<![\w.])\d+(?![\w.])", line)]


def _mesh_text(ids: list[int]) -> str:
    if len(ids) > 2 and ids == list(range(ids[0], ids[0] + len(ids))):
        return f"[{ids[0]}-{ids[-1]}]"
    return "[" + ",".join(map(str, ids)) + "]"


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_inspect_table_shows_the_summary(programs: dict[str, Path], name: str) -> None:
    want = expected(programs[name])
    result = invoke("inspect", programs[name], "--seg-method", "DecoderLayer", env=WIDE)
    out = result.stdout
    assert f"{want.blocks} block" in _line(out, "block")
    ops_line = _line(out, "ops:")
    assert sum(want.ops.values()) in _numbers(ops_line)
    for kind, n in want.ops.items():
        assert f"{n} {kind}" in ops_line
    assert want.vars in _numbers(_line(out, "vars"))
    assert want.params in _numbers(_line(out, "parameters"))
    assert "elements" in _line(out, "parameters")
    layout = _line(out, "layout")
    assert LAYOUT_NAMES[LAYOUTS[name]] in layout
    assert "chunk" in layout and "0" in layout
    # One row per stage, in stage order: the stage, its mesh, its layers, its op counts.
    rows = [ln.split() for ln in out.splitlines() if re.match(r"^\s*\d+\s+\[", ln)]
    assert [r[0] for r in rows] == [str(s) for s in range(len(want.stage_meshes))]
    for row, mesh, layers, ops in zip(rows, want.stage_meshes, want.stage_layers, want.stage_ops):
        text = " ".join(row)
        assert row[1] == _mesh_text(mesh)
        # The layers by their numbers (DecoderLayer_k is layer k, DecoderLayer layer 0).
        assert _expand(row[2]) == [_layer_number(n) for n in layers]
        counts = f"{ops['forward']} {ops['backward']} {ops['optimizer']}"
        assert counts in text, text
    assert "layer numbers: 0 = DecoderLayer, 1 = DecoderLayer_1" in out


def _layer_number(name: str) -> int:
    return int(name.rpartition("_")[2]) if "_" in name else 0


def _expand(cell: str) -> list[int]:
    """`0–1,4–5` -> [0, 1, 4, 5]."""
    out: list[int] = []
    for run in cell.split(","):
        a, _, b = run.partition("–")
        out += range(int(a), int(b or a) + 1)
    return out


def test_inspect_table_of_a_converted_program_shows_each_chunks_layers(
    programs: dict[str, Path],
) -> None:
    """4 layers, pp 2, vpp 2: stage 0 holds layer 0 (chunk 0) and layer 2 (chunk 1)."""
    out = invoke("inspect", programs["converted"], env=WIDE).stdout
    rows = [ln.split() for ln in out.splitlines() if re.match(r"^\s*\d+\s+\[", ln)]
    assert [r[2:5] for r in rows] == [["0", "|", "2"], ["1", "|", "3"]]


def test_inspect_json_of_a_converted_program_lists_each_chunks_layers(
    programs: dict[str, Path],
) -> None:
    got = inspect_json(programs["converted"])
    assert [s["layers_by_chunk"] for s in got["stages"]] == [
        [
            {"chunk": 0, "layers": ["DecoderLayer"], "numbers": [0]},
            {"chunk": 1, "layers": ["DecoderLayer_2"], "numbers": [2]},
        ],
        [
            {"chunk": 0, "layers": ["DecoderLayer_1"], "numbers": [1]},
            {"chunk": 1, "layers": ["DecoderLayer_3"], "numbers": [3]},
        ],
    ]
    assert got["layers"]["names"] == [
        "DecoderLayer",
        "DecoderLayer_1",
        "DecoderLayer_2",
        "DecoderLayer_3",
    ]


def test_inspect_of_an_interleaved_layout_without_chunk_ids_lists_one_chunk_per_stage(
    programs: dict[str, Path],
) -> None:
    """Chunk ids still 0: the stage's layers are one chunk in two runs."""
    got = inspect_json(programs["interleaved"])
    assert [[c["numbers"] for c in s["layers_by_chunk"]] for s in got["stages"]] == [
        [[0, 1, 4, 5]],
        [[2, 3, 6, 7]],
    ]
    rows = [
        ln.split()
        for ln in invoke("inspect", programs["interleaved"], env=WIDE).stdout.splitlines()
    ]
    assert ["0", "[0]", "0–1,4–5"] in [r[:3] for r in rows]


def test_inspect_names_the_layers_a_regex_matched(programs: dict[str, Path]) -> None:
    """`Layer` also matches the final LayerNorm: the numbers line shows it."""
    out = invoke("inspect", programs["blocked"], "--seg-method", "Layer", env=WIDE).stdout
    assert "layers: Layer x 5" in out
    assert "layer numbers: 0 = Layer, 1 = Layer_1, …, 4 = LayerNorm" in out
    got = inspect_json(programs["blocked"], "--seg-method", "Layer")
    assert got["layers"]["names"] == ["Layer", "Layer_1", "Layer_2", "Layer_3", "LayerNorm"]


def test_inspect_table_of_a_converted_program(programs: dict[str, Path]) -> None:
    result = invoke("inspect", programs["converted"], env=WIDE)
    assert "interleaved VPP" in _line(result.stdout, "layout")
    assert "0, 1" in _line(result.stdout, "layout") or "0,1" in _line(result.stdout, "layout")
    plan = _line(result.stdout, "plan")
    assert "pp 2" in plan and "vpp 2" in plan


def test_inspect_table_of_an_unannotated_program(programs: dict[str, Path]) -> None:
    result = invoke("inspect", programs["unannotated"], env=WIDE)
    assert "unannotated" in _line(result.stdout, "layout")


def test_inspect_reads_text_format(programs: dict[str, Path], tmp_path: Path) -> None:
    text = tmp_path / "prog.textproto"
    assert (
        invoke("dump", programs["no-backward"], "-o", text, env=WIDE, exit_code=None).exit_code == 0
    )
    assert inspect_json(text)["ops"] == inspect_json(programs["no-backward"])["ops"]


# -- dump ----------------------------------------------------------------------------


def _program(path: Path) -> pb.ProgramDesc:
    return pb.ProgramDesc.FromString(path.read_bytes())


@pytest.mark.parametrize("name", [*sorted(VARIANTS), "converted", "unannotated"])
def test_dump_prints_every_op_and_var_as_text(programs: dict[str, Path], name: str) -> None:
    result = invoke("dump", programs[name], env=WIDE)
    assert result.stderr == ""
    msg = _program(programs[name])
    assert result.stdout.count("\n  ops {\n") == len(msg.blocks[0].ops)
    assert result.stdout.count("\n  vars {\n") == len(msg.blocks[0].vars)
    assert result.stdout.startswith("blocks {\n")


# Parsing text is slow in pure Python: the full comparison runs on a few variants.
@pytest.mark.parametrize("name", ["no-backward", "unannotated"])
def test_dump_prints_text_format_that_parses_back_to_the_program(
    programs: dict[str, Path], name: str
) -> None:
    result = invoke("dump", programs[name], env=WIDE)
    assert text_format.Parse(result.stdout, pb.ProgramDesc()) == _program(programs[name])


@pytest.mark.parametrize("suffix", [".pbtxt", ".textproto", ".txtpb"])
def test_dump_converts_binary_to_text_and_back_by_extension(
    programs: dict[str, Path], tmp_path: Path, suffix: str
) -> None:
    src = programs["no-backward"]
    text, back = tmp_path / f"prog{suffix}", tmp_path / "back.pb"
    first = invoke("dump", src, "-o", text, env=WIDE, exit_code=None)
    assert (first.exit_code, first.stdout) == (0, "")
    assert first.stderr.startswith(f"wrote {text} (")
    assert text_format.Parse(text.read_text(), pb.ProgramDesc()) == _program(src)
    second = invoke("dump", text, "-o", back, "-q", env=WIDE, exit_code=None)
    assert (second.exit_code, second.stdout, second.stderr) == (0, "", "")
    assert back.read_bytes() == src.read_bytes()


def test_dump_round_trips_a_converted_program_through_text(
    programs: dict[str, Path], tmp_path: Path
) -> None:
    """The plan convert records (ProgramDesc field 1002) survives text too."""
    src, text, back = programs["converted"], tmp_path / "prog.pbtxt", tmp_path / "back.pb"
    assert invoke("dump", src, "-o", text, env=WIDE, exit_code=None).exit_code == 0
    assert "pipeline_plan {" in text.read_text()
    assert invoke("dump", text, "-o", back, env=WIDE, exit_code=None).exit_code == 0
    assert back.read_bytes() == src.read_bytes()


def test_dump_text_to_text(programs: dict[str, Path], tmp_path: Path) -> None:
    a, b = tmp_path / "a.pbtxt", tmp_path / "b.txtpb"
    assert invoke("dump", programs["no-backward"], "-o", a, env=WIDE, exit_code=None).exit_code == 0
    assert invoke("dump", a, "-o", b, env=WIDE, exit_code=None).exit_code == 0
    assert b.read_text() == a.read_text()


def _saved_bytes(stderr: str) -> tuple[float, float]:
    """The bytes `--strip-callstack` reports saved, as a (low, high) range for its rounding."""
    stderr = " ".join(stderr.split())  # the console may wrap the line
    m = re.search(r"([\d.]+)\s*(B|KB|MB|GB|KiB|MiB|GiB)\b.*saved|saved\D*([\d.]+)\s*(\w+)", stderr)
    assert m, stderr
    value, unit = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
    scale = {"B": 1, "KB": 1 << 10, "KiB": 1 << 10, "MB": 1 << 20, "MiB": 1 << 20}.get(
        unit, 1 << 30
    )
    half = 0.5 * 10 ** -len(value.partition(".")[2]) * scale
    return float(value) * scale - half, float(value) * scale + half


def _without_callstack(msg: pb.ProgramDesc) -> pb.ProgramDesc:
    out = pb.ProgramDesc()
    out.CopyFrom(msg)
    for block in out.blocks:
        for op in block.ops:
            keep = [a for a in op.attrs if a.name != "op_callstack"]
            del op.attrs[:]
            op.attrs.extend(keep)
    return out


def test_dump_strip_callstack_removes_every_op_callstack_and_reports_bytes_saved(
    programs: dict[str, Path], tmp_path: Path
) -> None:
    src, out = programs["callstack"], tmp_path / "stripped.pb"
    original = _program(src)
    assert all(any(a.name == "op_callstack" for a in op.attrs) for op in original.blocks[0].ops)
    result = invoke("dump", src, "--strip-callstack", "-o", out, env=WIDE)
    assert result.stdout == ""
    stripped = _program(out)
    assert not any(
        a.name == "op_callstack" for b in stripped.blocks for o in b.ops for a in o.attrs
    )
    assert stripped == _without_callstack(original)
    low, high = _saved_bytes(result.stderr)
    assert low <= len(src.read_bytes()) - len(out.read_bytes()) <= high
    assert src.read_bytes() == programs["callstack"].read_bytes()


def test_dump_strip_callstack_to_stdout(programs: dict[str, Path]) -> None:
    src = programs["callstack"]
    result = invoke("dump", src, "--strip-callstack", env=WIDE)
    assert "op_callstack" not in result.stdout
    assert text_format.Parse(result.stdout, pb.ProgramDesc()) == _without_callstack(_program(src))
    assert "saved" in result.stderr


def test_dump_strip_callstack_of_a_program_without_any_saves_nothing(
    programs: dict[str, Path], tmp_path: Path
) -> None:
    src, out = programs["blocked"], tmp_path / "same.pb"
    result = invoke("dump", src, "--strip-callstack", "-o", out, env=WIDE)
    assert out.read_bytes() == src.read_bytes()
    assert _saved_bytes(result.stderr)[0] <= 0


# -- every file in samples/ -------------------------------------------------------------

SAMPLE_FILES = (
    sorted(p for p in SAMPLES.glob("*") if p.name != "README.md") if SAMPLES.is_dir() else []
)


def test_there_are_samples_to_inspect() -> None:
    assert SAMPLE_FILES, f"no sample programs in {SAMPLES}"


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_inspect_and_dump_work_on_every_checked_in_sample(path: Path, tmp_path: Path) -> None:
    want = expected(path)
    got = inspect_json(path)
    assert got["ops"]["total"] == sum(want.ops.values())
    assert got["params"] == {"count": want.params, "elements": want.param_elements}
    assert got["stage_meshes"] == want.stage_meshes
    assert got["layout"] in ("plain", "interleaved")
    table = invoke("inspect", path, env=WIDE)
    assert LAYOUT_NAMES[got["layout"]] in table.stdout
    text = invoke("dump", path, env=WIDE, exit_code=None)
    assert (text.exit_code, text.stderr) == (0, "")
    assert text.stdout.count("\n  ops {\n") == sum(want.ops.values())
    binary = tmp_path / "prog.pb"
    result = invoke("dump", path, "-o", binary, env=WIDE, exit_code=None)
    wrote = f"wrote {binary} ({human_bytes(binary.stat().st_size)})\n"
    assert (result.exit_code, result.stderr) == (0, wrote)
    if path.suffix == ".pb":
        assert binary.read_bytes() == path.read_bytes()
    else:
        assert expected(binary) == want
