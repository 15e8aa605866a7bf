"""`vppctl/engine/moves.py`: every parameter's (stage, chunk) before and after a conversion.

The move map is what remaps a checkpoint when pp or vpp change, so that no layer is
re-initialised: it must name every parameter of the program exactly once, with the bytes
it holds, where it lived in the input and where the converted program puts it. Each of
those is checked against an independent reading of the protobuf (parameters, their
bytes, their meshes and chunk ids before and after), over a family of programs: layer
counts, stage counts, ranks per stage, optimizers, vpp, placement and splits.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from commandline import invoke
from programs import DTYPE_BYTES

from vppctl.engine import cost
from vppctl.engine import moves as moves_module
from vppctl.program._proto import program_pb2 as pb
from vppctl.sample import SampleOptions, build_sample


def parameters(data: bytes) -> dict[str, tuple[int, tuple[int, ...], int]]:
    """name -> (bytes, mesh process ids, chunk id) of every parameter, from the protobuf."""
    prog = pb.ProgramDesc.FromString(data)
    out = {}
    for block in prog.blocks:
        for v in block.vars:
            if v.is_parameter:
                t = v.type.dense_tensor.tensor
                size = math.prod(abs(d) for d in t.dims) * DTYPE_BYTES[t.data_type]
                attr = v.dist_attr
                out[v.name] = (size, tuple(attr.process_mesh.process_ids), max(attr.chunk_id, 0))
    return out


def stage_of(data: bytes) -> dict[tuple[int, ...], int]:
    """Stage mesh -> stage, as the converted program's recorded plan names them."""
    prog = pb.ProgramDesc.FromString(data)
    return {tuple(s.mesh.process_ids): s.stage for s in prog.pipeline_plan.segments}


FAMILY = [
    (SampleOptions(layers=8, pp=4), ["--vpp", "2"]),
    (SampleOptions(layers=8, pp=4), ["--vpp", "2", "--placement", "v"]),
    (SampleOptions(layers=12, pp=4, ranks_per_stage=2, optimizer="sgd"), ["--vpp", "3"]),
    (SampleOptions(layers=10, pp=2, hidden=64, vocab=512), ["--vpp", "2", "--split", "balanced"]),
    (SampleOptions(layers=9, pp=3, hidden=64, vocab=512, optimizer="none"), ["--vpp", "3"]),
    (SampleOptions(layers=16, pp=4, hidden=64, vocab=512), ["--layout", "Et*3|t|t*2|(t*2|)*4t*2L"]),
    (SampleOptions(layers=6, pp=2, hidden=64, vocab=512), ["--vpp", "1", "--split", "balanced"]),
]


@pytest.mark.parametrize(("options", "args"), FAMILY, ids=[" ".join(a) for _, a in FAMILY])
def test_every_parameter_moves_once_with_its_bytes(
    tmp_path: Path, options: SampleOptions, args: list[str]
) -> None:
    src, out, moves = tmp_path / "p.pb", tmp_path / "p.vpp.pb", tmp_path / "moves.json"
    src.write_bytes(build_sample(options))
    result = invoke("convert", str(src), *args, "-o", str(out), "--moves", str(moves), "--json")
    written = json.loads(moves.read_text())
    assert json.loads(result.stdout)["moves"] == {
        k: written[k] for k in json.loads(result.stdout)["moves"]
    }
    before, after = parameters(src.read_bytes()), parameters(out.read_bytes())
    listed = written["list"]
    names = [m["name"] for m in listed]
    assert len(names) == len(set(names)) == len(before) == written["parameters"]  # each once
    assert set(names) == set(before)
    assert (
        sum(m["bytes"] for m in listed) == written["bytes"] == sum(b for b, _, _ in before.values())
    )
    old_stage = {mesh: s for s, mesh in enumerate(sorted({m for _, m, _ in before.values()}))}
    new_stage = stage_of(out.read_bytes())
    for m in listed:
        size, mesh, chunk = before[m["name"]]
        assert m["bytes"] == size
        assert m["from"] == {"stage": old_stage[mesh], "chunk": chunk}
        _, mesh, chunk = after[m["name"]]
        assert m["to"] == {"stage": new_stage[mesh], "chunk": chunk}
    moved = [m for m in listed if m["from"] != m["to"]]
    assert written["moved"] == len(moved) and written["moved_bytes"] == sum(
        m["bytes"] for m in moved
    )
    assert "wrote " + str(moves) in result.stderr


def test_the_moves_file_is_its_schema(tmp_path: Path) -> None:
    from importlib import resources

    src, moves = tmp_path / "p.pb", tmp_path / "m.json"
    src.write_bytes(build_sample(SampleOptions(layers=4, pp=2, hidden=64, vocab=256)))
    invoke("convert", str(src), "--vpp", "2", "-o", str(tmp_path / "o.pb"), "--moves", str(moves))
    schema = json.loads(
        resources.files("vppctl.report").joinpath("schemas", "moves.json").read_text()
    )
    document = json.loads(moves.read_text())
    jsonschema.validate(document, schema)
    assert document["pp"] == 2 and document["vpp"] == 2 and document["moved"] > 0


def test_a_failed_conversion_writes_no_moves_and_moves_cannot_be_the_program(
    tmp_path: Path,
) -> None:
    src = tmp_path / "p.pb"
    src.write_bytes(build_sample(SampleOptions(layers=4, pp=2, hidden=64, vocab=256)))
    moves = tmp_path / "m.json"
    invoke(
        "convert",
        str(src),
        "--vpp",
        "3",
        "-o",
        str(tmp_path / "o.pb"),
        "--moves",
        str(moves),
        exit_code=4,
    )
    assert not moves.exists() and not (tmp_path / "o.pb").exists()
    same = invoke(
        "convert", str(src), "--vpp", "2", "-o", str(moves), "--moves", str(moves), exit_code=2
    )
    assert "name the same file" in same.stderr
    into = invoke(
        "convert",
        str(src),
        "--vpp",
        "2",
        "-o",
        str(tmp_path / "o.pb"),
        "--moves",
        str(src),
        exit_code=2,
    )
    assert not (tmp_path / "o.pb").exists() and "Error:" in into.stderr


@pytest.mark.parametrize(("options", "args"), FAMILY, ids=[" ".join(a) for _, a in FAMILY])
def test_each_parameter_is_read_once_by_the_splits_and_the_moves(
    tmp_path: Path, options: SampleOptions, args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The splits' costs (elements) and the moves (bytes) read a parameter's VarDesc once
    between them, whatever the split and cost: one parse per parameter, not two."""
    reads: list[tuple[int, int]] = []
    for module in (cost, moves_module):  # every variable read the engine makes there
        for name in ("var_tensor", "var_dims", "var_shape"):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, _counted(getattr(module, name), reads))
    src, out, moves = tmp_path / "p.pb", tmp_path / "p.vpp.pb", tmp_path / "moves.json"
    src.write_bytes(build_sample(options))
    invoke("convert", str(src), *args, "-o", str(out), "--moves", str(moves))
    assert len(reads) == len(set(reads)) == len(parameters(src.read_bytes()))


def _counted(read: Callable[[Any, int], Any], reads: list[tuple[int, int]]) -> Callable[..., Any]:
    def counted(block: Any, pos: int) -> Any:
        reads.append((id(block), pos))
        return read(block, pos)

    return counted
