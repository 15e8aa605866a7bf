"""The outcomes of the schedule commands (simulate, plan), and their JSON: `to_json()` is
exactly the object the command's `--json` prints."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from vppctl.choices import Runtime
from vppctl.errors import ConversionError
from vppctl.outcomes.memory import NO_STAGE_MEMORY, stage_memory_json

# What the planner found, carried by simulate's and convert's outcomes and re-exported here
# with them (their one definition is vppctl.planner.simulate).
from vppctl.planner import Bubble as Bubble
from vppctl.planner import (
    Candidate,
    Conversion,
    HopCost,
    Layouts,
    MeasuredStep,
    MemoryOptions,
    PirInput,
    PirLaunch,
    PirSplit,
    PlanResult,
    PlanSearchOptions,
    SegmentTimes,
    Settings,
    StageMemory,
    iec,
    pir_verdict,
    shell,
    worst_stage,
)
from vppctl.planner import SimulatedPlan as SimulatedPlan
from vppctl.schedule import SimResult, Step, rounded
from vppctl.shapes import BUBBLE_DEFINITION, document, error_object

# -- simulate ----------------------------------------------------------------------

# The schedules a default comparison sets beside 1F1B (`vppctl.schedule.comparison`).
INTERLEAVING = ("interleaved", "vpp", "zbv", "zbvpp")


def hop_json(hop: HopCost | None) -> dict[str, Any] | None:
    """What a hop cost and where it came from (`vppctl.planner.HopCost`)."""
    if hop is None:
        return None
    link = hop.link
    return {
        "source": hop.source,
        "cost": rounded(hop.cost),
        "hop_bytes": hop.hop_bytes,
        "seconds": hop.seconds,
        "unit_seconds": hop.unit_seconds,
        "unit": "seconds" if hop.unit == "s" else "the mean stage's forward of one micro-batch",
        "link": None
        if link is None
        else {
            "name": link.name,
            "device": link.device,
            "flops": link.flops,
            "link": link.link,
            "bandwidth": link.bandwidth,
            "latency": link.latency,
        },
        "why": hop.why or None,
    }


@dataclass(frozen=True)
class SimulateOutcome:
    """What `simulate_run` simulated: one result per schedule, and with a program its
    plan and each stage's bytes per schedule."""

    results: tuple[SimResult, ...]
    costs_from: str | None  # the program the costs came from
    written: tuple[tuple[str, int], ...]  # (path, bytes) of the SVG, trace and CSV files
    plan: SimulatedPlan | None = None  # with a program
    memory: tuple[tuple[StageMemory, ...], ...] = ()  # per result, with a program
    memory_options: MemoryOptions | None = None
    warnings: tuple[str, ...] = ()  # the plan's, the memory model's and the simulator's
    runtime: Runtime = "any"  # whose rules and schedules
    hop: HopCost | None = None  # what a hop cost (None: not said)
    measured: SegmentTimes | None = None  # measured costs: every time is then seconds
    measured_step: MeasuredStep | None = None  # the step measured, to state the error

    def to_json(self, *, steps: bool = False) -> dict[str, Any]:
        """The object `vppctl simulate --json` prints; `steps` adds every step."""
        return simulation_json(self, steps=steps)

    @property
    def over_memory_limit(self) -> bool | None:
        """Whether a stage's peak exceeds the memory limit in any schedule simulated
        (None: no limit was given, or no program to size)."""
        opts = self.memory_options
        if opts is None or opts.limit is None or not self.memory:
            return None
        return any(s.over_limit for stages in self.memory for s in stages)

    @property
    def stages_over_limit(self) -> str:
        """`stage 0 in 1F1B (v=1); stages 0, 1 in interleaved 1F1B (v=2)`: what is over
        the memory limit, per schedule simulated."""
        parts = []
        for result, stages in zip(self.results, self.memory):
            over = [str(s.stage) for s in stages if s.over_limit]
            if over:
                noun = "stage" if len(over) == 1 else "stages"
                parts.append(f"{noun} {', '.join(over)} in {result.title}")
        return "; ".join(parts)


def comparison_pair(results: Sequence[SimResult]) -> tuple[SimResult, SimResult] | None:
    """The (1F1B, interleaving schedule) pair to compare, if both are present."""
    baseline = next((r for r in results if r.schedule == "1f1b"), None)
    candidate = next((r for r in results if r.schedule in INTERLEAVING and r.vpp > 1), None)
    if baseline is None or candidate is None:
        return None
    return baseline, candidate


def simulation_warnings(results: Sequence[SimResult]) -> tuple[str, ...]:
    """The simulator's warnings of every result, each once, in order."""
    return tuple(dict.fromkeys(w for r in results for w in r.warnings))


def _step_json(step: Step) -> dict[str, Any]:
    return {
        "stage": step.stage,
        "chunk": step.chunk,
        "virtual_stage": step.virtual_stage,
        "micro_batch": step.micro_batch,
        "kind": step.kind,
        "action": step.action,
        "start": rounded(step.start),
        "end": rounded(step.end),
    }


def costs_source_json(measured: SegmentTimes | None) -> dict[str, Any] | None:
    if measured is None:
        return None
    source = measured.source
    return {"path": source.path, "format": source.format, "unit": source.unit}


def measured_json(
    measured: SegmentTimes | None, step: MeasuredStep | None
) -> dict[str, Any] | None:
    """What the measured costs were: their source, what was filled, the importer's notes,
    and the step measured (null without measured costs)."""
    if measured is None:
        return None
    return {
        "costs_source": costs_source_json(measured),
        "weight_measured": measured.weight_measured,
        "filled": list(measured.filled),
        "notes": list(measured.notes),
        "measured_step_s": None if step is None else rounded(step.seconds),
        "measured_step_from": None if step is None else step.source,
    }


def prediction_json(
    makespan: Fraction, measured: SegmentTimes | None, step: MeasuredStep | None
) -> dict[str, Any]:
    """A result's step predicted in seconds, the step measured and the signed error
    (predicted - measured) / measured; null where there are no measured costs or step."""
    predicted = makespan if measured is not None else None
    error = None if predicted is None or step is None else step.error(predicted)
    return {
        "predicted_step_s": None if predicted is None else rounded(predicted),
        "measured_step_s": None if step is None or predicted is None else rounded(step.seconds),
        "error": None if error is None else rounded(error),
        "costs_source": costs_source_json(measured),
    }


def _result_json(
    result: SimResult,
    steps: bool,
    memory: Sequence[StageMemory] | None,
    outcome: SimulateOutcome | None = None,
) -> dict[str, Any]:
    orders = result.orders
    per_stage = []
    for stage in range(result.pp):
        entry: dict[str, Any] = {
            "stage": stage,
            "bubble": rounded(result.per_stage_bubble[stage]),
            "idle": rounded(result.per_stage_idle[stage]),
            "peak_in_flight": result.peak_in_flight[stage],
            "peak_in_flight_stages": rounded(result.peak_in_flight_stage_units[stage]),
            "peak_in_flight_per_chunk": list(result.peak_in_flight_per_chunk[stage]),
            "order": list(orders[stage]),
        }
        entry.update(NO_STAGE_MEMORY if memory is None else stage_memory_json(memory[stage]))
        per_stage.append(entry)
    data: dict[str, Any] = {
        "schedule": result.schedule,
        "pp": result.pp,
        "vpp": result.vpp,
        "plan_vpp": result.plan_vpp,
        "placement": result.placement,
        "group_size": result.group_size,
        "micro_batches": result.micro_batches,
        "p2p_cost": rounded(result.p2p_cost),
        "makespan": rounded(result.makespan),
        "ideal": rounded(result.ideal),
        "bubble": rounded(result.bubble),
        "bubble_vs_ideal": rounded(result.bubble_vs_ideal),
        "stage_imbalance": rounded(result.stage_imbalance),
        "p2p_messages": result.p2p_messages,
        "per_stage": per_stage,
        "warnings": list(result.warnings),
        # Exact values for anyone checking closed forms; floats above are rounded.
        "exact": {
            "makespan": str(result.makespan),
            "ideal": str(result.ideal),
            "bubble": str(result.bubble),
            "bubble_vs_ideal": str(result.bubble_vs_ideal),
        },
    }
    data["memory"] = None
    if memory is not None:
        worst = worst_stage(memory)
        data["memory"] = {"worst_stage": worst.stage, "peak_bytes": worst.peak_bytes}
    data["steps"] = [_step_json(step) for step in result.steps] if steps else None
    measured, step = (None, None) if outcome is None else (outcome.measured, outcome.measured_step)
    data.update(prediction_json(result.makespan, measured, step))
    return data


def _plan_json(simulated: SimulatedPlan, opts: MemoryOptions | None) -> dict[str, Any]:
    p = simulated.plan
    out: dict[str, Any] = {
        "pp": p.pp,
        "vpp": p.vpp,
        "placement": p.placement,
        "split": simulated.split,
        "recorded": simulated.recorded,
        "layers_per_segment": [len(s.layers) for s in p.segments],
        "costs": {
            "measure": simulated.measure,
            "forward": list(simulated.segment_costs),
            "ratios": dict(zip(("forward", "backward", "weight"), map(rounded, simulated.costs))),
        },
        "memory": None,
    }
    if opts is not None:
        out["memory"] = {
            "micro_batch_size": opts.micro_batch_size,
            "seq_len": opts.seq_len,
            "limit_bytes": opts.limit,
        }
    return out


def time_unit(measured: SegmentTimes | None, program: bool) -> str:
    """What every time of a simulation is in."""
    if measured is not None:
        return "seconds"
    return "the mean stage's forward of one micro-batch" if program else "the unit of --costs"


def simulation_json(
    results: Sequence[SimResult] | SimulateOutcome, *, steps: bool = False
) -> dict[str, Any]:
    """The JSON of a simulation: an outcome's (`SimulateOutcome.to_json`), or the pure
    simulator's results alone; ``steps=True`` adds every step."""
    outcome, runs = (
        (results, results.results)
        if isinstance(results, SimulateOutcome)
        else (None, tuple(results))
    )
    memory: Sequence[Sequence[StageMemory] | None] = (
        outcome.memory if outcome is not None and outcome.memory else [None] * len(runs)
    )
    data: dict[str, Any] = {"bubble_definition": BUBBLE_DEFINITION}
    data["runtime"] = None if outcome is None else outcome.runtime
    data["p2p"] = None if outcome is None else hop_json(outcome.hop)
    data["plan"] = None
    if outcome is not None and outcome.plan is not None:
        data["plan"] = _plan_json(outcome.plan, outcome.memory_options)
    measured = None if outcome is None else outcome.measured
    data["time_unit"] = time_unit(measured, outcome is not None and outcome.plan is not None)
    data["measured"] = None if outcome is None else measured_json(measured, outcome.measured_step)
    data["results"] = [_result_json(r, steps, m, outcome) for r, m in zip(runs, memory)]
    data["over_memory_limit"] = None if outcome is None else outcome.over_memory_limit
    data["comparison"] = None
    pair = comparison_pair(runs)
    if pair is not None:
        base, vpp = pair
        data["comparison"] = {
            "baseline": base.schedule,
            "candidate": vpp.schedule,
            "speedup": rounded(base.makespan / vpp.makespan),
            "bubble": [rounded(base.bubble), rounded(vpp.bubble)],
            "bubble_vs_ideal": [rounded(base.bubble_vs_ideal), rounded(vpp.bubble_vs_ideal)],
            "stage0_activation_ratio": rounded(
                vpp.peak_in_flight_stage_units[0] / base.peak_in_flight_stage_units[0]
            ),
        }
    written = () if outcome is None else outcome.written
    data["written"] = [{"path": path, "bytes": size} for path, size in written]
    data["warnings"] = list(simulation_warnings(runs) if outcome is None else outcome.warnings)
    return document("simulate", data)


# -- plan --------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanOutcome:
    """What `plan_run` found: the candidates, best first (`result`), and what it searched."""

    source: str
    search: PlanSearchOptions
    result: PlanResult

    def to_json(self) -> dict[str, Any]:
        """The object `vppctl plan --json` prints."""
        return plan_json(self)


class NoConversionFits(ConversionError):
    """`plan_run` found no candidate that fits (exit 4); `outcome` is what it searched:
    no candidates, those over the memory limit and what was refused."""

    def __init__(self, message: str, outcome: PlanOutcome) -> None:
        super().__init__(message)
        self.outcome = outcome

    def to_json(self) -> dict[str, Any]:
        """The object `vppctl plan --json` prints for this failure: what was searched,
        with `error` set."""
        return {**self.outcome.to_json(), "error": error_object(self)}


def conversion_split(conversion: Conversion, pir: PirInput) -> PirSplit:
    """A PIR program's conversion as Paddle's PIR completion would make it, or why not."""
    c = conversion.best
    return pir_verdict(c.pp, c.vpp, c.placement, c.layers_per_segment, pir)


def settings_json(s: Settings) -> dict[str, Any]:
    settings = {k: list(v) if isinstance(v, tuple) else v for k, v in s.settings}
    return {"runs": s.runs, "settings": settings, "note": s.note}


def layouts_json(split: Layouts) -> dict[str, Any]:
    """A candidate's split in each runtime's terms (`vppctl.planner.Layouts`)."""
    parts = split.deepspeed_parts
    stages = split.paddle_stage_per_layer
    return {
        "megatron": split.megatron,
        "torchtitan": [list(names) for names in split.torchtitan],
        "deepspeed": None
        if parts is None
        else {"parts": list(parts), "partition_method_uniform": split.deepspeed_uniform},
        "paddle_stage_per_layer": None if stages is None else list(stages),
    }


def command_json(command: Sequence[str]) -> dict[str, Any]:
    """`command` and `argv` of a conversion: null for a PIR program's split that needs no
    `vppctl convert` (Paddle's strategy alone makes it, or Paddle cannot run it)."""
    if not command:
        return {"command": None, "argv": None}
    return {"command": shell(command), "argv": list(command)}


def candidate_json(
    c: Candidate,
    best: Candidate,
    layer_class: str,
    micro_batch_size: int,
    pir: PirInput | None = None,
    measured: SegmentTimes | None = None,
) -> dict[str, Any]:
    worst = c.worst
    launch = c.launch(layer_class, micro_batch_size, pir)
    split = c.layouts(pir)
    return {
        **command_json(c.command),
        "vpp": c.vpp,
        "placement": c.placement,
        "split": c.split,
        "schedule": c.schedule,
        "group_size": c.group_size,
        "micro_batches": c.micro_batches,
        "makespan": rounded(c.makespan),
        "time_per_micro_batch": rounded(c.time_per_micro_batch),
        "relative": rounded(c.time_per_micro_batch / best.time_per_micro_batch),
        "bubble": rounded(c.bubble),
        "p2p_messages": c.p2p_messages,
        "p2p_cost": rounded(c.hop.cost),
        "hop_bytes": c.hop.hop_bytes,
        "layers_per_segment": list(c.layers_per_segment),
        "megatron_layout": c.megatron_layout,
        "peak_bytes": worst.peak_bytes,
        "worst_stage": worst.stage,
        "per_stage": [{"stage": s.stage, **stage_memory_json(s)} for s in c.memory],
        "launch": {
            **{s.runtime: settings_json(s) for s in launch},
            "paddle_pir": None if pir is None else pir_launch_json(c.pir_launch(pir)),
        },
        "layouts": layouts_json(split),
        "exact": {"makespan": str(c.makespan), "bubble": str(c.bubble)},
        **prediction_json(c.makespan, measured, None),
    }


def over_limit_json(
    c: Candidate,
    best: Candidate,
    layer_class: str,
    micro_batch_size: int,
    limit: int | None,
    pir: PirInput | None = None,
    measured: SegmentTimes | None = None,
) -> dict[str, Any]:
    """A candidate left out by --memory-limit, and why: the stages over it."""
    over = [s for s in c.memory if s.over_limit]
    shown = ", ".join(f"stage {s.stage} {iec(s.peak_bytes)}" for s in over)
    reason = f"over --memory-limit {iec(limit)}: {shown}" if limit is not None else "over the limit"
    return {
        **candidate_json(c, best, layer_class, micro_batch_size, pir, measured),
        "reason": reason,
        "stages_over_limit": [s.stage for s in over],
    }


def pir_launch_json(launch: PirLaunch) -> dict[str, Any]:
    """How a candidate's split runs on Paddle's PIR pipeline (`vppctl.planner.PirLaunch`)."""
    return {
        "how": launch.how,
        "text": launch.text,
        "python": list(launch.python),
        "reason": launch.reason,
        "rule": launch.rule,
    }


def pir_split_json(split: PirSplit, launch: PirLaunch) -> dict[str, Any]:
    return {
        "takes": split.takes,
        "reason": split.reason,
        "stage_layers": list(split.stage_layers),
        "chunk_layers": [list(chunks) for chunks in split.chunk_layers],
        "moves_layers": split.moves_layers,
        "launch": launch.how,
        "python": list(launch.python),
    }


def conversion_json(
    conversion: Conversion, index: dict[int, int], pir: PirInput | None = None
) -> dict[str, Any]:
    c = conversion.best
    split = (
        None
        if pir is None
        else pir_split_json(conversion_split(conversion, pir), c.pir_launch(pir))
    )
    return {
        **command_json(conversion.command),
        "paddle_pir": split,
        "vpp": c.vpp,
        "placement": c.placement,
        "split": c.split,
        "layers_per_segment": list(c.layers_per_segment),
        "schedules": list(conversion.schedules),
        "micro_batches": list(conversion.micro_batches),
        "best": index[id(c)],
    }


def plan_json(o: PlanOutcome) -> dict[str, Any]:
    r, opts = o.result, o.search
    best = (r.candidates or r.over or (None,))[0]
    index = {id(c): i for i, c in enumerate(r.candidates)}
    size, limit, layer_class, pir = (
        opts.memory.micro_batch_size,
        opts.memory.limit,
        r.layer_class,
        r.pir,
    )
    m = r.measured
    fits = (
        [candidate_json(c, best, layer_class, size, pir, m) for c in r.candidates] if best else []
    )
    over = (
        [over_limit_json(c, best, layer_class, size, limit, pir, m) for c in r.over] if best else []
    )
    return document(
        "plan",
        {
            "source": o.source,
            "pp": r.pp,
            "layers": {"count": r.n_layers, "class": r.layer_class},
            "pir": None
            if pir is None
            else {
                "stage_layers": list(pir.stage_layers),
                "vpp_seg_method": pir.vpp_seg_method,
                "best": r.best_on_pir,
            },
            "runtime": r.runtime,
            "costs": "measured" if m is not None else r.measure,
            "p2p": hop_json(best.hop) if best is not None else None,
            "time_unit": time_unit(m, True),
            "measured": measured_json(m, None),
            "bubble_definition": BUBBLE_DEFINITION,
            "order": "time per micro-batch (makespan / micro_batches), then the worst stage's "
            "peak bytes, then p2p messages",
            "memory": {
                "micro_batch_size": opts.memory.micro_batch_size,
                "seq_len": opts.memory.seq_len,
                "limit_bytes": opts.memory.limit,
            },
            "conversions": [conversion_json(v, index, pir) for v in r.conversions],
            "candidates": fits,
            "over_limit": r.over_limit,
            "over_limit_candidates": over,
            "refused": [{"reason": reason, "count": n} for reason, n in r.refused],
            "notes": [{"rule": rule, "count": n} for rule, n in r.notes],
            "warnings": list(r.warnings),
        },
    )
