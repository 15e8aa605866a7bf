"""`vppctl/planner/costs.py`: what a hop between stages costs, counted by default and said.

A hop carries what the program's forward ops on one side of a cut write and those on the
other side read (checked against an independent reading of the protobuf), at the micro-batch
size and sequence length given, over a named device and link (vendor peak figures); its
cost is in the simulator's time unit, the mean stage's forward at the device's peak. The
header of `plan` and `simulate` says the assumption, `--p2p-cost 0` leaves hops out, and
counting them moves the candidates with more messages down (the README tour's program).
With measured costs (seconds) a hop is in seconds: its bytes over the link, or
`--p2p-cost` read in seconds.
"""

from __future__ import annotations

import json
import math
import statistics
from fractions import Fraction
from pathlib import Path

import paths
import pytest
from commandline import invoke
from programs import DTYPE_BYTES

from vppctl.planner.costs import DEFAULT_LINK, LINKS
from vppctl.program._proto import program_pb2 as pb
from vppctl.sample import SampleOptions, build_sample

TOUR = paths.SAMPLE  # the README tour's program: 8 layers on pp 4


def json_of(*args: object) -> dict:  # type: ignore[type-arg]
    return json.loads(invoke(*args, "--json").stdout)  # type: ignore[no-any-return]


def cut_bytes(data: bytes, cut: int, micro_batch_size: int = 1) -> int:
    """Bytes the forward carries into stage `cut` of a plain-PP program, read from the
    protobuf: non-persistable variables a forward op on an earlier stage mesh writes and
    one on stage `cut` or later reads; the first -1 dimension is the micro-batch size."""
    prog = pb.ProgramDesc.FromString(data)
    block = prog.blocks[0]
    by_name = {v.name: v for v in block.vars}
    meshes = sorted({tuple(op.dist_attr.process_mesh.process_ids) for op in block.ops})
    stage = {mesh: s for s, mesh in enumerate(meshes)}
    written: dict[str, bool] = {}
    crossing: set[str] = set()
    for op in block.ops:
        role = next((a.i for a in op.attrs if a.name == "op_role"), 0)
        if role not in (0, 256):  # forward ops (and the loss)
            continue
        before = stage[tuple(op.dist_attr.process_mesh.process_ids)] < cut
        for slot in op.inputs:
            crossing |= {n for n in slot.arguments if written.get(n) and not before}
        for slot in op.outputs:
            for name in slot.arguments:
                written.setdefault(name, before)
    total = 0
    for name in crossing:
        v = by_name[name]
        if not v.persistable:
            t = v.type.dense_tensor.tensor
            dims = [micro_batch_size if d == -1 else d for d in t.dims]
            total += math.prod(dims) * DTYPE_BYTES[t.data_type]
    return total


def one_row(*extra: object) -> dict:  # type: ignore[type-arg]
    """plan's JSON for the tour at m 8, vpp 1, uniform split, 1F1B: one row."""
    return json_of(
        "plan", TOUR, "-m", "8", "--vpp", "1", "--split", "uniform", "--schedule", "1f1b", *extra
    )


def test_a_hop_carries_the_programs_boundary_activations() -> None:
    data = TOUR.read_bytes()
    plan = one_row()
    (c,) = plan["candidates"]
    expected = max(cut_bytes(data, k) for k in (1, 2, 3))  # uniform: the program's own stages
    assert c["hop_bytes"] == expected == 1024 * 1024 * 4  # the hidden state: seq x hidden x fp32
    four = one_row("--micro-batch-size", "4")
    assert four["candidates"][0]["hop_bytes"] == 4 * expected


def test_the_time_unit_and_the_hop_come_from_the_link_preset() -> None:
    plan = one_row()
    p2p = plan["p2p"]
    link = LINKS[DEFAULT_LINK]
    assert p2p["source"] == "link" and p2p["link"]["name"] == DEFAULT_LINK
    assert p2p["seconds"] == pytest.approx(link.latency + p2p["hop_bytes"] / link.bandwidth)
    assert p2p["cost"] == pytest.approx(p2p["seconds"] / p2p["unit_seconds"], rel=1e-3)
    nvlink = one_row("--link", "h100-nvlink")["p2p"]
    assert nvlink["cost"] < p2p["cost"]  # 450 GB/s against 50 GB/s, the same FLOP/s
    a100 = one_row("--link", "a100-ib")["p2p"]
    assert a100["unit_seconds"] == pytest.approx(p2p["unit_seconds"] * 989.4 / 312)


def test_the_header_prints_the_assumption_and_0_leaves_hops_out() -> None:
    counted = invoke("plan", TOUR, "-m", "8,16").stdout
    line = next(x for x in counted.splitlines() if x.startswith("p2p: "))
    assert "4.0 MiB per hop" in line and "h100-ib" in line and "vendor peak" in line
    assert "--p2p-cost 0 leaves it out" in line
    zero = invoke("plan", TOUR, "-m", "8,16", "--p2p-cost", "0").stdout
    assert "p2p: not counted (--p2p-cost 0)" in zero.splitlines()
    simulated = invoke("simulate", TOUR, "--vpp", "2", "-m", "8").stdout
    assert any(x.startswith("p2p: 4.0 MiB per hop") for x in simulated.splitlines())
    unit = invoke("simulate", "--pp", "4", "--vpp", "2", "-m", "8").stdout
    assert "p2p: not counted (no program to size a hop from); pass --p2p-cost to count it" in unit


def test_counting_hops_moves_the_candidates_with_more_messages_down() -> None:
    """Acceptance 5: on the README tour's program, with the hops counted, the ranking
    changes, and in the bytes' direction: every candidate pays for its hops, the more
    messages the more, so the best one counted sends fewer messages per micro-batch."""
    args = ["plan", TOUR, "-m", "8,16", "--runtime", "any"]
    free = json_of(*args, "--p2p-cost", "0")["candidates"]
    paid = json_of(*args)["candidates"]
    key = lambda c: (c["vpp"], c["placement"], c["split"], c["schedule"], c["micro_batches"])  # noqa: E731
    assert [key(c) for c in free] != [key(c) for c in paid]  # the ranking changes
    zero = {key(c): c for c in free}
    slower = [
        (
            c["p2p_messages"] / c["micro_batches"],
            c["time_per_micro_batch"] / zero[key(c)]["time_per_micro_batch"],
        )
        for c in paid
    ]
    assert all(ratio > 1 for _, ratio in slower)  # every step pays for its hops
    assert statistics.correlation(*zip(*slower)) > 0.5  # the more messages, the more it pays
    interleaved = [next(i for i, c in enumerate(cs) if c["vpp"] > 1) for cs in (free, paid)]
    assert interleaved[1] > interleaved[0]  # the best interleaved candidate moves down
    per_mb = [[c["p2p_messages"] / c["micro_batches"] for c in cs] for cs in (free, paid)]
    third = len(free) // 3
    assert sum(per_mb[1][-third:]) > sum(per_mb[0][-third:])  # and the chattiest sink


def test_a_hop_is_given_or_timed_not_both() -> None:
    result = invoke(
        "plan", TOUR, "-m", "8", "--p2p-cost", "0.5", "--link", "h100-nvlink", exit_code=2
    )
    assert "pass one of them" in result.stderr
    result = invoke(
        "simulate", "--pp", "4", "--vpp", "2", "-m", "8", "--link", "h100-ib", exit_code=2
    )
    assert "pass the program" in result.stderr


def test_a_program_without_matmul_shapes_has_no_time_to_size_a_hop_in(tmp_path: Path) -> None:
    src = tmp_path / "p.pb"
    src.write_bytes(
        build_sample(SampleOptions(layers=4, pp=2, hidden=64, vocab=128, backward=False))
    )
    data = json_of("simulate", src, "--vpp", "1", "-m", "4")
    assert data["p2p"]["source"] in ("link", "none")


def test_measured_costs_and_the_default_hop_give_a_step_in_seconds_with_the_hops_time(
    tmp_path: Path,
) -> None:
    """Measured costs in seconds plus the hop counted by default: the hop is the program's
    boundary bytes (read from the protobuf here) over the default link's bandwidth, plus
    its latency, in seconds; one micro-batch under FThenB runs every action in a row, so
    the step is the measured costs' sum and 2 (pp - 1) such hops (to the JSON's 6 digits)."""
    forward, backward = ["0.010", "0.011", "0.012", "0.013"], ["0.020", "0.021", "0.022", "0.025"]
    costs = tmp_path / "stages.csv"
    rows = [f"{k},{f},{b}" for k, (f, b) in enumerate(zip(forward, backward))]
    costs.write_text("stage,forward_s,backward_s\n" + "\n".join(rows) + "\n")
    args = ["simulate", TOUR, "--vpp", "1", "--split", "uniform", "-m", "1"]
    args += ["--schedule", "fthenb", "--costs-from", costs]
    data = json_of(*args)
    link = LINKS[DEFAULT_LINK]
    size = max(cut_bytes(TOUR.read_bytes(), k) for k in (1, 2, 3))  # the largest cut
    hop = Fraction(round((link.latency + size / link.bandwidth) * 10**9), 10**9)
    measured = sum(Fraction(x) for x in forward + backward)
    hops = 2 * (4 - 1)  # pp 4: three hops forward, three back
    (result,) = data["results"]
    assert data["time_unit"] == "seconds"
    assert data["p2p"]["source"] == "link" and data["p2p"]["unit"] == "seconds"
    assert data["p2p"]["hop_bytes"] == size
    assert data["p2p"]["seconds"] == pytest.approx(float(hop), abs=1e-9)
    assert data["p2p"]["cost"] == pytest.approx(float(hop), abs=1e-6)  # JSON keeps 6 digits
    assert result["predicted_step_s"] == pytest.approx(float(measured + hops * hop), abs=1e-6)
    assert float(hop) > 1e-5  # a hop that counts: about 0.1 ms against 0.144 s of costs
    free = json_of(*args, "--p2p-cost", "0")["results"][0]["predicted_step_s"]
    assert free == pytest.approx(float(measured), abs=1e-6)
    # --p2p-cost with measured costs is seconds, as they are; the header says so.
    given = json_of(*args, "--p2p-cost", "0.001")["results"][0]["predicted_step_s"]
    assert given == pytest.approx(float(measured) + hops * 0.001, abs=1e-6)
    text = invoke(*args).stdout
    assert f"p2p: 4.0 MiB per hop over {DEFAULT_LINK} " in text
    assert f": {float(hop) * 1e6:.4g} us per hop (bytes / bandwidth + latency)" in text
    text = invoke(*args, "--p2p-cost", "0.001").stdout
    assert "p2p: 1 ms per hop (--p2p-cost, in seconds as the measured costs)" in text
    assert "p2p: not counted (--p2p-cost 0)" in invoke(*args, "--p2p-cost", "0").stdout
