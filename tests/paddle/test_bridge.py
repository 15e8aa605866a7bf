"""The Paddle bridge's legacy export and apply (vppctl/paddle/legacy.py, and the errors of
vppctl/paddle/errors.py) against the real PaddlePaddle 3.3.1 (legacy static mode).

What these tests pin down:

* ``export_program`` keeps Paddle's desc intact, adds layer paths, op ids,
  ``forward_op_id`` and the dist attrs, and Paddle parses the bytes back.
* ``apply_annotations`` reproduces Paddle's own VPP completion exactly when fed
  Paddle's own answer, and refuses op lists that differ.
* The round trip: a plain-PP program exported from Paddle, converted by
  ``vppctl convert --vpp V --seg-method DecoderLayer`` and applied back, carries
  the same meshes and chunk ids as Paddle's own PP->VPP completion
  (``Completer._complete_chunk_id``), forward and backward, ops and variables.
  Optimizer-phase ops and variables only used by them are compared by mesh:
  Paddle's ``complete_update_annotation`` leaves their chunk id 0.

The reference programs are written to ``/tmp/paddle_progs`` (or
``$VPPCTL_PADDLE_PROGS``) as ``pp{P}_v{V}_{clip|noclip}_{plain|paddlevpp}.pb``
(plain-PP completion and Paddle's own VPP completion of the same program), plus
``pp{P}_v{V}_{clip|noclip}_paddlezbvpp.pb`` for Paddle's V shape.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import paths
import pytest
from commandline import invoke

pytest.importorskip(
    "paddle",
    reason="PaddlePaddle is not installed; the Paddle bridge tests need "
    "pip install 'vppctl[paddle]' (paddlepaddle==3.3.1)",
)

from paddle_compare import _mesh, _role, compare_annotations
from paddle_compare import report as _report

from vppctl import paddle as bridge
from vppctl.program._proto import program_pb2 as pb

pytestmark = [pytest.mark.paddle, pytest.mark.heavy]

REPO = paths.ROOT
OP_ROLE_OPTIMIZE = 0x0002  # paddle OpRole.Optimize
OP_ROLE_BACKWARD = 0x0001


def _config_id(config: tuple[int, int, bool]) -> str:
    pp, v, clip = config
    return f"pp{pp}_v{v}_{'clip' if clip else 'noclip'}"


CONFIGS = [(pp, v, clip) for pp in (2, 4) for v in (2, 4) for clip in (False, True)]
# Each config costs two Paddle builds. CI builds half of them live, every pp, vpp and clip
# value and every pair of them once (a covering design), the other half with
# VPPCTL_SLOW=1: the half whose exports and Paddle's answers are checked in
# (tests/data/paddle_reference/), which CI compares with vppctl's conversion without
# Paddle (tests/paddle/test_reference.py). So CI sees all eight.
LIVE_IN_CI = {(2, 2, False), (2, 4, True), (4, 2, True), (4, 4, False)}
LIVE_CONFIGS = [
    pytest.param(c, marks=[] if c in LIVE_IN_CI else [pytest.mark.slow], id=_config_id(c))
    for c in CONFIGS
]


def _parse(data: bytes) -> pb.ProgramDesc:
    program = pb.ProgramDesc()
    program.ParseFromString(data)
    return program


def _layer_name(struct_name: str) -> str | None:
    m = re.search("DecoderLayer", struct_name, re.IGNORECASE)
    return struct_name[m.start() :].split("/")[0] if m else None


def _layer_names(ops: Iterable[pb.OpDesc]) -> list[str]:
    names: list[str] = []
    for op in ops:
        name = _layer_name(op.struct_name)
        if name is not None and name not in names:
            names.append(name)
    return names


# ----------------------------------------------------------------------------
# (a) export without a dist context


def test_export_without_dist_context(gpt_builder: Callable[..., Any]) -> None:
    import paddle

    built = gpt_builder(2, 4, complete=False)
    data = bridge.export_program(built.main)
    program = _parse(data)

    py_ops = list(built.main.global_block().ops)
    ops = program.blocks[0].ops
    assert [op.type for op in ops] == [op.type for op in py_ops]
    assert [op.struct_name for op in ops] == [op.struct_name for op in py_ops]
    assert ops[0].type == "lookup_table_v2"
    assert ops[0].struct_name == "/GPTModel/Embedding/"
    # Paddle numbers sibling layers X, X_1, X_2, ...: the first layer has no suffix.
    assert _layer_names(ops) == [
        "DecoderLayer",
        "DecoderLayer_1",
        "DecoderLayer_2",
        "DecoderLayer_3",
    ]
    assert any(op.struct_name == "/GPTModel/DecoderLayer_3/MLP/Linear_1/" for op in ops)
    assert {op.type for op in ops} >= {
        "layer_norm",
        "matmul_v2",
        "elementwise_add",
        "gelu",
        "softmax_with_cross_entropy",
        "mean",
    }
    assert len({op.id for op in ops}) == len(ops)
    assert not any(op.HasField("dist_attr") or op.HasField("forward_op_id") for op in ops)
    assert not any(v.HasField("dist_attr") for v in program.blocks[0].vars)
    assert not program.process_meshes

    # Paddle's own fields are untouched ...
    stripped = pb.ProgramDesc()
    stripped.CopyFrom(program)
    for block in stripped.blocks:
        for op in block.ops:
            op.ClearField("struct_name")
            op.ClearField("id")
    assert stripped == _parse(built.main.desc.serialize_to_string())
    # ... and Paddle reads vppctl's bytes (it skips the fields it does not know).
    back = paddle.static.Program.parse_from_string(data)
    assert [op.type for op in back.global_block().ops] == [op.type for op in py_ops]


def test_inspect_shows_the_layers_of_an_export_without_dist_context(
    gpt_builder: Callable[..., Any], tmp_path: Path
) -> None:
    import json

    built = gpt_builder(2, 4, complete=False)
    path = tmp_path / "export.pb"
    path.write_bytes(bridge.export_program(built.main))
    result = invoke("inspect", str(path), "--json")
    summary = json.loads(result.stdout)
    assert summary["layers"]["class"] == "DecoderLayer"
    assert summary["layers"]["count"] == 4
    assert summary["layout"] == "unannotated"
    table = invoke("inspect", str(path))
    assert "layers: DecoderLayer x 4 (detected)" in table.stdout


def test_export_with_dist_context_plain_pp(gpt_builder: Callable[..., Any]) -> None:
    built = gpt_builder(2, 4, clip=True)
    program = _parse(bridge.export_program(built.main, built.dist_context))
    ops = program.blocks[0].ops

    assert [tuple(m.process_ids) for m in program.process_meshes] == [(0,), (1,)]
    assert [list(m.dim_names) for m in program.process_meshes] == [["dp"], ["dp"]]
    by_id = {op.id: op for op in ops}
    for i, op in enumerate(ops):
        assert op.HasField("dist_attr"), f"op {i} {op.type} has no dist attr"
        assert op.dist_attr.chunk_id == 0
        assert op.dist_attr.impl_type
    layer_stage = {name: i * 2 // 4 for i, name in enumerate(_layer_names(ops))}
    for op in ops:
        name = _layer_name(op.struct_name)
        if name is not None:
            assert _mesh(op.dist_attr) == (layer_stage[name],), op.struct_name
    grads = [op for op in ops if op.type.endswith("_grad")]
    assert grads and all(op.HasField("forward_op_id") for op in grads)
    for op in grads:
        forward = by_id[op.forward_op_id]
        assert op.type == forward.type + "_grad"
        assert _role(op) & OP_ROLE_BACKWARD and not _role(forward) & OP_ROLE_BACKWARD
    assert all(
        v.HasField("dist_attr")
        for v in program.blocks[0].vars
        if not v.name.startswith(("feed", "fetch"))
    )


# ----------------------------------------------------------------------------
# Paddle's own VPP answer, the reference files, and apply_annotations on it


@pytest.mark.parametrize("config", LIVE_CONFIGS)
def test_paddle_vpp_reference(
    config: tuple[int, int, bool],
    gpt_builder: Callable[..., Any],
    paddle_reference: Callable[[int, int, bool], Any],
) -> None:
    pp, vpp, clip = config
    ref = paddle_reference(pp, vpp, clip)
    n, paddle_vpp = ref.n_layers, ref.paddle_vpp

    # Paddle 3.3.1 splits uniformly: segment k of pp*vpp holds n/(pp*vpp) layers
    # and sits on stage k % pp as chunk k // pp.
    expected = _parse(paddle_vpp)
    meshes = [tuple(m.process_ids) for m in expected.process_meshes]
    names = _layer_names(expected.blocks[0].ops)
    assert len(names) == n
    per_segment = n // (pp * vpp)
    for op in expected.blocks[0].ops:
        name = _layer_name(op.struct_name)
        if name is None:
            continue
        segment = names.index(name) // per_segment
        assert _mesh(op.dist_attr) == meshes[segment % pp], (op.struct_name, op.type)
        assert op.dist_attr.chunk_id == segment // pp, (op.struct_name, op.type)

    # Paddle's answer applied onto a fresh plain-PP build is Paddle's answer, to
    # the last op and variable, optimizer chunk ids included.
    fresh = gpt_builder(pp, n, clip=clip)
    bridge.apply_annotations(fresh.main, fresh.dist_context, paddle_vpp)
    ours = _parse(bridge.export_program(fresh.main, fresh.dist_context))
    diffs = compare_annotations(expected, ours, optimizer_chunks=True)
    assert not diffs, _report(diffs)


@pytest.mark.parametrize(
    "config", [(2, 2, False), (2, 4, False), (4, 2, False), (2, 2, True)], ids=_config_id
)
def test_paddle_zbvpp_reference(
    config: tuple[int, int, bool],
    gpt_builder: Callable[..., Any],
    keep_export: Callable[[str, bytes], None],
) -> None:
    """Paddle's V shape (schedule_mode="ZBVPP"), pinned and saved as *_paddlezbvpp.pb."""
    pp, vpp, clip = config
    n = 8
    built = gpt_builder(pp, n, vpp=vpp, clip=clip, schedule_mode="ZBVPP")
    data = bridge.export_program(built.main, built.dist_context)
    keep_export(f"{_config_id(config)}_paddlezbvpp.pb", data)

    program = _parse(data)
    ops = program.blocks[0].ops
    meshes = [tuple(m.process_ids) for m in program.process_meshes]
    names = _layer_names(ops)
    per_segment = n // (pp * vpp)
    last_layer_op = max(i for i, op in enumerate(ops) if _layer_name(op.struct_name))
    for i, op in enumerate(ops):
        if _role(op) & OP_ROLE_BACKWARD:
            break
        name = _layer_name(op.struct_name)
        if name is not None:
            segment = names.index(name) // per_segment
            chunk, position = divmod(segment, pp)
            stage = position if chunk % 2 == 0 else pp - 1 - position
            assert (_mesh(op.dist_attr), op.dist_attr.chunk_id) == (meshes[stage], chunk)
        elif i > last_layer_op:
            # The loss part follows the last chunk, which ends on stage 0 for even vpp.
            assert (_mesh(op.dist_attr), op.dist_attr.chunk_id) == (meshes[0], vpp - 1)


def _built_pair(built: Any) -> tuple[Any, Any]:
    return built.main, built.dist_context


def test_apply_on_two_rank_stage_meshes(gpt_builder: Callable[..., Any]) -> None:
    """Stage meshes of two ranks each (shape [2]) survive export and apply."""
    paddle_vpp = bridge.export_program(
        *_built_pair(gpt_builder(2, 8, vpp=2, clip=True, ranks_per_stage=2))
    )
    expected = _parse(paddle_vpp)
    assert [tuple(m.process_ids) for m in expected.process_meshes] == [(0, 1), (2, 3)]
    fresh = gpt_builder(2, 8, clip=True, ranks_per_stage=2)
    bridge.apply_annotations(fresh.main, fresh.dist_context, paddle_vpp)
    diffs = compare_annotations(
        expected,
        _parse(bridge.export_program(fresh.main, fresh.dist_context)),
        optimizer_chunks=True,
    )
    assert not diffs, _report(diffs)


# ----------------------------------------------------------------------------
# apply_annotations refuses programs that do not match


def _snapshot(built: Any) -> list[tuple[Any, ...]]:
    ctx = built.dist_context
    return [
        (tuple(a.process_mesh.process_ids), a.chunk_id)
        for op in built.main.global_block().ops
        if (a := ctx.get_op_dist_attr_for_program(op)) is not None
    ]


def test_apply_refuses_a_different_op_type(gpt_builder: Callable[..., Any]) -> None:
    source = gpt_builder(2, 4, vpp=2)
    program = _parse(bridge.export_program(source.main, source.dist_context))
    index = next(i for i, op in enumerate(program.blocks[0].ops) if op.type == "gelu")
    program.blocks[0].ops[index].type = "relu"
    target = gpt_builder(2, 4)
    before = _snapshot(target)
    with pytest.raises(bridge.ProgramMismatchError) as err:
        bridge.apply_annotations(target.main, target.dist_context, program.SerializeToString())
    message = str(err.value)
    assert f"block 0, op {index}" in message
    assert "'relu'" in message and "'gelu'" in message
    assert isinstance(err.value, bridge.PaddleBridgeError)
    assert _snapshot(target) == before


def test_apply_refuses_a_different_op_count(gpt_builder: Callable[..., Any]) -> None:
    source = gpt_builder(2, 4, vpp=2)
    program = _parse(bridge.export_program(source.main, source.dist_context))
    last = program.blocks[0].ops[-1].type
    del program.blocks[0].ops[-1]
    target = gpt_builder(2, 4)
    with pytest.raises(bridge.ProgramMismatchError) as err:
        bridge.apply_annotations(target.main, target.dist_context, program.SerializeToString())
    n = len(target.main.global_block().ops)
    message = str(err.value)
    assert "block 0" in message and f"op {n - 1}" in message and repr(last) in message
    assert f"{n - 1} ops" in message and f"has {n}" in message


def test_apply_refuses_garbage_and_missing_context(gpt_builder: Callable[..., Any]) -> None:
    target = gpt_builder(2, 4)
    with pytest.raises(bridge.AnnotationError):
        bridge.apply_annotations(target.main, target.dist_context, b"\xff\xff\xff not a program")
    with pytest.raises(bridge.AnnotationError):
        bridge.apply_annotations(target.main, None, b"")


# ----------------------------------------------------------------------------
# (b) the round trip through `vppctl convert`


@pytest.mark.parametrize("config", LIVE_CONFIGS)
def test_roundtrip_through_vppctl_convert(
    config: tuple[int, int, bool],
    gpt_builder: Callable[..., Any],
    paddle_reference: Callable[[int, int, bool], Any],
    tmp_path: Path,
) -> None:
    pp, vpp, clip = config
    ref = paddle_reference(pp, vpp, clip)

    source = tmp_path / "plain.pb"
    converted = tmp_path / "vpp.pb"
    source.write_bytes(ref.plain)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "vppctl",
            "convert",
            str(source),
            "-o",
            str(converted),
            "--vpp",
            str(vpp),
            "--seg-method",
            "DecoderLayer",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, (
        f"vppctl convert exited {run.returncode}\nstdout:\n{run.stdout}\nstderr:\n{run.stderr}"
    )

    fresh = gpt_builder(pp, ref.n_layers, clip=clip)
    bridge.apply_annotations(fresh.main, fresh.dist_context, converted.read_bytes())
    ours = _parse(bridge.export_program(fresh.main, fresh.dist_context))
    diffs = compare_annotations(_parse(ref.paddle_vpp), ours)
    assert not diffs, _report(diffs)


def test_ci_sees_every_config_live_or_checked_in() -> None:
    checked_in = {
        (pp, v, clip)
        for pp, v, clip in CONFIGS
        if (paths.PADDLE_REFERENCE / f"{_config_id((pp, v, clip))}_paddlevpp.pb").exists()
    }
    assert checked_in | LIVE_IN_CI == set(CONFIGS)
