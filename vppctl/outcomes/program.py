"""The outcomes of the program commands that write a program (convert, dump, sample), and
their JSON: `to_json()` is exactly the object the command's `--json` prints."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vppctl import schedule
from vppctl.convert import ConvertResult
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
        "ops": {"total": r.n_ops, "changed": r.ops_changed},
        "vars": {"total": r.n_vars, "changed": r.vars_changed},
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
    return document("convert", body)


def _bubble_json(bubble: Bubble) -> dict[str, Any]:
    measured = bubble.measured
    source = None if measured is None else measured.source
    return {
        "definition": BUBBLE_DEFINITION,
        "micro_batches": bubble.micro_batches,
        "costs": bubble.measure if measured is None else "measured",
        "schedules": {s: schedule.rounded(share) for s, share in bubble.schedules.items()},
        # With measured costs: the step of each schedule, in seconds, and where they came from.
        "steps_s": None
        if measured is None
        else {s: schedule.rounded(step) for s, step in bubble.steps.items()},
        "costs_source": None
        if source is None
        else {"path": source.path, "format": source.format, "unit": source.unit},
        "filled": None if measured is None else list(measured.filled),
    }


def _convert_memory_json(bubble: Bubble) -> dict[str, Any]:
    return {
        "micro_batch_size": 1,
        "seq_len": None,
        "per_schedule": {
            schedule: [{"stage": s.stage, **stage_memory_json(s)} for s in stages]
            for schedule, stages in bubble.memory.items()
        },
    }
