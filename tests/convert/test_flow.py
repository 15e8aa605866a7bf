"""Data-flow facts of a program (vppctl/engine/flow.py): the cross-stage edges a plan makes,
counted once per variable and consuming stage, forward ops only, as convert and verify
report them.
"""

from __future__ import annotations

import json
from pathlib import Path

from commandline import invoke
from failures import write
from programs import layered
from verifykit import fan

# -- cross-stage edges ---------------------------------------------------------------------


def test_convert_reports_cross_stage_edges_before_and_after(
    tmp_path: Path, sample_bytes: dict[tuple[int, int], bytes]
) -> None:
    src = write(tmp_path, sample_bytes[8, 4])
    out = tmp_path / "out.pb"
    r = invoke("convert", str(src), "--vpp", "2", "-o", str(out), "--json")
    edges = json.loads(r.stdout)["cross_stage_edges"]
    assert set(edges) == {"before", "after"}
    assert 0 < edges["before"] < edges["after"]  # VPP multiplies point-to-point traffic
    v = invoke("verify", str(out), "--json")
    assert json.loads(v.stdout)["cross_stage_edges"] == edges["after"]
    before = invoke("verify", str(src), "--vpp", "1", "--json")
    data = json.loads(before.stdout)
    if data["valid"]:
        assert data["cross_stage_edges"] == edges["before"]


def test_cross_stage_edges_count_each_variable_once_per_consuming_stage() -> None:
    from vppctl.engine.flow import cross_stage_edges
    from vppctl.engine.index import build_index

    # h0 (stage 0) is read by layers on stages 1 and 2: two edges; the head on stage 2 reads
    # both layer outputs, from stages 1 and 2: one more edge.
    p = fan([(1, 0), (2, 0)], head=(2, 0))
    index = build_index(p.program())
    stages, _ = index.stage_mesh_ids()
    assert cross_stage_edges(index, stages) == 3


def test_backward_and_optimizer_ops_do_not_count_as_edges() -> None:
    from vppctl.engine.flow import cross_stage_edges
    from vppctl.engine.index import build_index

    p = layered([0, 1])
    plain = p.program()
    q = layered([0, 1], backward=True, optimizer=True)
    index_plain, index_full = build_index(plain), build_index(q.program())
    assert cross_stage_edges(index_plain, index_plain.stage_mesh_ids()[0]) == cross_stage_edges(
        index_full, index_full.stage_mesh_ids()[0]
    )


# -- names containing a part (index.named) -------------------------------------------------


def test_named_finds_every_name_holding_the_part_across_search_pieces() -> None:
    from vppctl.engine.index import _NAMES_PER_SEARCH, named

    n = 3 * _NAMES_PER_SEARCH + 5
    hits = {0, _NAMES_PER_SEARCH - 1, _NAMES_PER_SEARCH, 2 * _NAMES_PER_SEARCH + 1, n - 1}
    names = [b"w.subprog_1" if i in hits else b"w_%d" % i for i in range(n)]
    assert named(names, b".subprog_") == sorted(hits)
    assert named(names, b"absent") == []
    assert named([], b"x") == []


def test_named_never_matches_across_two_names() -> None:
    from vppctl.engine.index import named

    # The search joins names with a newline; a part spanning two names is no match.
    assert named([b"ab", b"cd"], b"b\nc") == []
    assert named([b"ab", b"b\nc"], b"b\nc") == [1]
