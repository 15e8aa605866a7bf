"""The outcomes of the program commands that write a program (convert, dump, sample), and
their JSON: `to_json()` is exactly the object the command's `--json` prints."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vppctl import schedule
from vppctl.convert import ConvertResult
from vppctl.engine import Move, Place
from vppctl.outcomes.memory import stage_memory_json
from vppctl.shapes import BUBBLE_DEFINITION, document

if TYPE_CHECKING:  # the schedule side and the planner load on use
    from vppctl.planner import Bubble


@dataclass(frozen=True)
class ConvertOutcome:
    """What `convert_file` did: the conversion, what it wrote, the bubble if asked."""

    result: ConvertResult
    output: str  # as the user gave it ("-": stdout)
    bytes_written: int
    bubble: Bubble | None
    warnings: tuple[str, ...]  # the conversion's, the simulator's and the writer's
    to_stdout: bool = False  # the program went to stdout (`-o -`, /dev/stdout)
    moves_written: tuple[str, int] | None = None  # (path, bytes) of `--moves`

    def to_json(self) -> dict[str, Any]:
        """The object `vppctl convert --json` prints."""
        return convert_json(self)


@dataclass(frozen=True)
class DumpOutcome:
    """What `dump_file` wrote."""

    output: str  # as the user gave it ("-": stdout)
    bytes_written: int
    callstack_bytes_saved: int | None
    warnings: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """The object `vppctl dump -o OUT --json` prints."""
        data = written_json(self.output or "-", self.bytes_written, self.warnings)
        data["callstack_bytes_saved"] = self.callstack_bytes_saved
        return document("dump", data)


@dataclass(frozen=True)
class SampleOutcome:
    """What `sample_file` wrote."""

    output: str
    bytes_written: int
    warnings: tuple[str, ...] = ()  # the writer's (a replaced file's links, its ACLs)

    def to_json(self) -> dict[str, Any]:
        """The object `vppctl sample --json` prints."""
        return document("sample", written_json(self.output, self.bytes_written, self.warnings))


def written_json(output: str, bytes_written: int, warnings: Sequence[str]) -> dict[str, Any]:
    return {"output": output, "bytes_written": bytes_written, "warnings": list(warnings)}


def convert_json(o: ConvertOutcome) -> dict[str, Any]:
    r, bubble = o.result, o.bubble
    p = r.plan
    body: dict[str, Any] = {
        "pp": p.pp,
        "vpp": p.vpp,
        "placement": p.placement,
        "mode": p.mode,
        "split": p.split,
        "cost": p.cost_kind,
        "layers": {
            "count": p.n_layers,
            "class": p.layer_class,
            "seg_method": p.seg_method,
            "detected": p.detected,
        },
        "output": o.output,
        "bytes_written": o.bytes_written,
        "warnings": list(o.warnings),
        "ops": {
            "total": r.n_ops,
            "changed": r.ops_changed,
            "spliced": r.ops_spliced,
            "rewritten": r.ops_rewritten,
        },
        "vars": {
            "total": r.n_vars,
            "changed": r.vars_changed,
            "spliced": r.vars_spliced,
            "rewritten": r.vars_rewritten,
        },
        "cross_stage_edges": {"before": r.edges_before, "after": r.edges_after},
        "imbalance": round(p.imbalance, 4),
        "segments": [
            {
                "virtual_stage": s.virtual_stage,
                "stage": s.stage,
                "chunk": s.chunk,
                "mesh": list(s.mesh.process_ids),
                "layers": list(s.layers),
                "op_range": [s.op_begin, s.op_end],
                "ops": {"forward": st.forward, "backward": st.backward, "optimizer": st.optimizer},
                "params": st.params,
                "cost": s.cost,
            }
            for s, st in zip(p.segments, r.stats)
        ],
    }
    body["stage_loads"] = p.stage_loads
    body["stage_imbalance"] = round(p.stage_imbalance, 4)
    body["bubble"] = None if bubble is None else _bubble_json(bubble)
    body["memory"] = None if bubble is None else _convert_memory_json(bubble)
    body["callstack_bytes_saved"] = r.callstack_bytes_saved
    body["moves"] = moves_json(r.moves)
    body["moves_written"] = (
        None
        if o.moves_written is None
        else {"path": o.moves_written[0], "bytes": o.moves_written[1]}
    )
    return document("convert", body)


def _place_json(place: Place) -> dict[str, int | None]:
    return {"stage": place[0], "chunk": place[1]}


def moves_json(moves: Sequence[Move]) -> dict[str, Any]:
    """Every parameter once, with its (stage, chunk) before and after and its bytes."""
    moved = [m for m in moves if m.moved]
    return {
        "parameters": len(moves),
        "bytes": sum(m.bytes for m in moves),
        "moved": len(moved),
        "moved_bytes": sum(m.bytes for m in moved),
        "list": [
            {
                "name": m.name,
                "block": m.block,
                "bytes": m.bytes,
                "from": _place_json(m.before),
                "to": _place_json(m.after),
            }
            for m in moves
        ],
    }


def moves_document(result: ConvertResult, source: str, output: str) -> dict[str, Any]:
    """What `convert --moves FILE` writes: the conversion and every parameter's move."""
    p = result.plan
    body = {"source": source, "output": output, "pp": p.pp, "vpp": p.vpp}
    return document("moves", {**body, **moves_json(result.moves)})


def _bubble_json(bubble: Bubble) -> dict[str, Any]:
    measured = bubble.measured
    source = None if measured is None else measured.source
    return {
        "definition": BUBBLE_DEFINITION,
        "micro_batches": bubble.micro_batches,
        "costs": bubble.measure if measured is None else "measured",
        "runtime": bubble.runtime,
        "schedules": {s: schedule.rounded(share) for s, share in bubble.schedules.items()},
        # With measured costs: the step of each schedule, in seconds, and where they came from.
        "steps_s": None
        if measured is None
        else {s: schedule.rounded(step) for s, step in bubble.steps.items()},
        "costs_source": None
        if source is None
        else {"path": source.path, "format": source.format, "unit": source.unit},
        "filled": None if measured is None else list(measured.filled),
        # A hop's cost: in the mean stage's forward, or in seconds with measured costs.
        "p2p_cost": schedule.rounded(bubble.hop.cost),
        "hop_bytes": bubble.hop.hop_bytes,
        "stage_loads": list(bubble.stage_loads),
        "why": vpp_verdict(bubble),
    }


# Stages within this share of the mean load count as balanced; a hop that costs this share
# of a stage's forward counts; a bubble shrunk by less than this share is little
# (`vpp_verdict`).
BALANCED = 1.15
HOPS_MATTER = 0.1
LITTLE = 0.2


def vpp_verdict(bubble: Bubble) -> str | None:
    """One line on what interleaving bought, and why: the heavy end or split that no
    schedule hides (the LM head, the embedding), the hops it adds, or else the fill and
    drain it shrinks. None when only one schedule ran."""
    shares = [float(share) for share in bubble.schedules.values()]
    loads = bubble.stage_loads
    if len(shares) < 2 or not loads or not sum(loads):
        return None
    mean = sum(loads) / len(loads)
    busiest = max(range(len(loads)), key=lambda s: loads[s])
    ratio = loads[busiest] / mean
    heavy = None
    if ratio >= BALANCED:
        (pre_stage, pre), (post_stage, post) = bubble.ends
        excess = loads[busiest] - mean
        what = "the split"
        if busiest == post_stage and post >= excess:
            what = "the LM head"  # the ops after the last layer
        elif busiest == pre_stage and pre >= excess:
            what = "the embedding"  # the ops before the first layer
        heavy = (
            f"{what} makes stage {busiest} carry {ratio:.2f}x the mean load, which no "
            "schedule hides: try --split balanced"
        )
    hop = float(bubble.hop.cost)
    if bubble.measured is not None and bubble.hop.unit == "s":  # seconds: per mean forward
        forward = sum(bubble.measured.forward) / len(loads)
        hop = hop / float(forward) if forward else 0.0
    gain = f"bubble {shares[0]:.1%} -> {shares[1]:.1%}"
    if shares[0] - shares[1] >= LITTLE * shares[0]:
        shrinks = "it shrinks the fill and drain"
        if hop >= HOPS_MATTER:
            shrinks += f", worth more than its hops ({hop:.2f}x a stage's forward each)"
        if heavy is None:
            shrinks = f"the stages are balanced ({ratio:.2f}x the mean load at most), so {shrinks}"
        return f"interleaving pays here ({gain}): " + "; ".join(filter(None, (shrinks, heavy)))
    causes = [heavy] if heavy else []
    if hop >= HOPS_MATTER:
        causes.append(
            f"each hop costs {hop:.2f}x a stage's forward: try a lower --vpp, more "
            "--micro-batches or a faster --link"
        )
    said = "does not pay" if shares[1] >= shares[0] else "buys little"
    return f"interleaving {said} here ({gain})" + (": " + "; ".join(causes) if causes else "")


def _convert_memory_json(bubble: Bubble) -> dict[str, Any]:
    return {
        "micro_batch_size": 1,
        "seq_len": None,
        "per_schedule": {
            schedule: [{"stage": s.stage, **stage_memory_json(s)} for s in stages]
            for schedule, stages in bubble.memory.items()
        },
    }
