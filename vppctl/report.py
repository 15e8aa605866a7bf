"""Report: every table (for people) and every JSON shape (for scripts), in one place.

Every renderer reads one command's outcome (`vppctl.commands`) or a result
inside it; none computes anything of its own. Tables fit 80 columns. The
pictures of a schedule (terminal timeline, SVG, trace) are in
`vppctl.schedule.timeline`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from vppctl.commands import Bubble, ConvertOutcome, DumpOutcome, SampleOutcome
from vppctl.convert import ConvertResult
from vppctl.expectation import VerifyReport
from vppctl.fields import RecordedPlan
from vppctl.layers import LayerSet
from vppctl.plan import Plan
from vppctl.schedule.simulate import SimResult, Step
from vppctl.schedule.timeline import (
    number,
    percent,
    render_timelines,
    rounded,
    stage_units,
    title,
)
from vppctl.summary import ChunkLayers, Summary
from vppctl.verify import RULES, Violation


def human(n: float) -> str:
    """1234567 -> 1.2M."""
    for unit, size in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.1f}{unit}"
    return f"{n:g}"


def human_bytes(n: int) -> str:
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


_NUMBERED = re.compile(r"(.*)_(\d+)")


def compact_layers(names: Sequence[str]) -> str:
    """A run of layers in one short cell: `DecoderLayer_103…111 (9)`, `DecoderLayer…_4 (5)`
    (Paddle's first instance has no suffix), else `first … last (n)`; one layer: its name."""
    if len(names) <= 1:
        return "".join(names)
    first, last = names[0], names[-1]
    numbered = _NUMBERED.fullmatch(last)
    if numbered is not None:
        prefix, number = numbered.groups()
        if first == prefix:
            return f"{first}…_{number} ({len(names)})"
        head = _NUMBERED.fullmatch(first)
        if head is not None and head[1] == prefix:
            return f"{first}…{number} ({len(names)})"
    return f"{first} … {last} ({len(names)})"


def layers_line(plan: Plan) -> str:
    how = "detected" if plan.detected else f"--seg-method {plan.seg_method}"
    return f"layers: {plan.layer_class} x {plan.n_layers} ({how})"


def convert_title(r: ConvertResult) -> str:
    p = r.plan
    return (
        f"pp {p.pp} x vpp {p.vpp}, {p.mode} mode: {r.ops_changed}/{r.n_ops} ops, "
        f"{r.vars_changed}/{r.n_vars} vars changed"
    )


def _table(title: str | None = None) -> Table:
    """A compact table: no outer edge, one space of padding, a rule under the header."""
    return Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 1),
        collapse_padding=True,
    )


def convert_table(r: ConvertResult) -> Table:
    p = r.plan
    show_cost = p.cost_kind != "params"
    table = _table()
    for name, justify in (
        ("VS", "right"),
        ("Stg", "right"),
        ("Ch", "right"),
        ("Mesh", "left"),
        ("Layers", "left"),
        ("Fwd", "right"),
        ("Bwd", "right"),
        ("Opt", "right"),
        ("Params", "right"),
    ):
        table.add_column(name, justify=justify, no_wrap=name != "Layers")  # type: ignore[arg-type]
    if show_cost:
        table.add_column(p.cost_kind.capitalize(), justify="right", no_wrap=True)
    for seg, st in zip(p.segments, r.stats):
        row = [
            str(seg.virtual_stage),
            str(seg.stage),
            str(seg.chunk),
            str(seg.mesh),
            compact_layers(seg.layers),
            str(st.forward),
            str(st.backward),
            str(st.optimizer),
            human(st.params),
        ]
        if show_cost:
            row.append(human(seg.cost))
        table.add_row(*map(Text, row))
    return table


def convert_notes(o: ConvertOutcome) -> list[str]:
    r, bubble = o.result, o.bubble
    p = r.plan
    notes = [
        layers_line(p),
        f"placement: {p.placement}; split: {p.split}",
        f"imbalance: {p.imbalance:.2f} (max/mean segment {p.cost_kind})",
        f"cross-stage edges per micro-batch: {r.edges_before} -> {r.edges_after}",
    ]
    if bubble is not None:
        notes.append(
            f"bubble (1F1B -> interleaved): {bubble.one_f_one_b:.1%} -> "
            f"{bubble.interleaved:.1%} of the step"
        )
    if r.callstack_bytes_saved is not None:
        notes.append(f"stripped op_callstack: {human_bytes(r.callstack_bytes_saved)} saved")
    return notes


def render_convert(console: Console, o: ConvertOutcome) -> None:
    # The title is its own line, not the table's title, so that it never wraps to
    # the table's width.
    console.print(Text(convert_title(o.result)), soft_wrap=True)
    console.print(convert_table(o.result))
    for line in convert_notes(o):
        console.print(Text(line))


def layers_json(layers: LayerSet | None) -> dict[str, Any]:
    """The one shape of a layer set in every command's JSON."""
    if not layers:
        return {"count": 0, "class": "", "seg_method": None, "detected": False}
    return {
        "count": len(layers),
        "class": layers.layer_class,
        "seg_method": layers.seg_method,
        "detected": layers.detected,
    }


def convert_json(o: ConvertOutcome) -> dict[str, Any]:
    r, bubble = o.result, o.bubble
    p = r.plan
    out: dict[str, Any] = {
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
    if bubble is not None:
        out["bubble"] = _bubble_json(bubble)
    if r.callstack_bytes_saved is not None:
        out["callstack_bytes_saved"] = r.callstack_bytes_saved
    return out


# Rows a terminal table shows; the JSON always holds everything.
TABLE_ROWS = 200


def violations_table(violations: Sequence[Violation], limit: int = TABLE_ROWS) -> Table:
    """The first `limit` violations (rendering is slow and unreadable past a few hundred)."""
    table = Table(
        title=f"{len(violations)} violation(s)",
        title_justify="left",
        show_edge=False,
        pad_edge=False,
    )
    table.add_column("Rule", no_wrap=True)
    table.add_column("Block", justify="right")
    table.add_column("Op", justify="right")
    table.add_column("Type", no_wrap=True)
    table.add_column("Message")
    for v in violations[:limit]:
        cells = (
            v.rule,
            str(v.block) if v.block >= 0 else "-",
            str(v.op) if v.op >= 0 else "-",
            v.type or "-",
            v.message,
        )
        table.add_row(*map(Text, cells))  # Text: names are not rich markup
    return table


def _bubble_json(bubble: Bubble) -> dict[str, float]:
    return {"1f1b": round(bubble.one_f_one_b, 6), "interleaved": round(bubble.interleaved, 6)}


def verify_line(report: VerifyReport) -> str:
    """The one line `verify` prints for a valid program."""
    layers = report.layers
    found = f"{len(layers)} layers ({layers.layer_class})" if layers else "no layers"
    line = (
        f"valid: pp {report.pp} x vpp {report.vpp}, {report.placement} placement, {found}; "
        f"cross-stage edges per micro-batch: {report.cross_stage_edges}"
    )
    if report.recorded is None:
        line += f"; {NO_PLAN}"
    return line


# Said whenever a program carries no plan: its vpp then comes from --vpp or its chunk
# ids, and its placement from --placement or loop, not from what convert decided.
NO_PLAN = "no pipeline plan recorded"


def render_verify(console: Console, report: VerifyReport) -> None:
    if report.valid:
        console.print(Text(verify_line(report)), soft_wrap=True)
        return
    console.print(violations_table(report.violations))
    hidden = len(report.violations) - TABLE_ROWS
    if hidden > 0:
        console.print(Text(f"... and {hidden} more violation(s); --json lists them all"))
    if report.recorded is None:
        console.print(
            Text(
                f"{NO_PLAN}: checked as pp {report.pp} x vpp {report.vpp} (vpp from --vpp or "
                f"the chunk ids), {report.placement} placement; a program not yet converted "
                "needs `vppctl convert` first"
            ),
            soft_wrap=True,
        )


def plan_json(plan: RecordedPlan | None) -> dict[str, Any] | None:
    """The one shape of a recorded plan in `verify` and `inspect` JSON (null: none)."""
    if plan is None:
        return None
    return {
        "pp": plan.pp,
        "vpp": plan.vpp,
        "placement": plan.placement,
        "mode": plan.mode,
        "split": plan.split,
        "vppctl_version": plan.vppctl_version,
    }


def verify_json(report: VerifyReport) -> dict[str, Any]:
    return {
        "valid": report.valid,
        "violations": [
            {
                "rule": v.rule,
                "cause": v.cause.value,
                "block": v.block,
                "op": v.op,
                "type": v.type,
                "message": v.message,
            }
            for v in report.violations
        ],
        "pp": report.pp,
        "vpp": report.vpp,
        "placement": report.placement,
        "layers": layers_json(report.layers),
        "cross_stage_edges": report.cross_stage_edges,
        "plan": plan_json(report.recorded),
    }


def rules_table() -> Table:
    table = _table()
    table.add_column("Rule", no_wrap=True)
    table.add_column("Checks")
    for rule, text in RULES.items():
        table.add_row(Text(rule), Text(text))
    return table


def summary_json(s: Summary) -> dict[str, Any]:
    return {
        "source": s.source,
        "bytes": s.size,
        "blocks": s.blocks,
        "ops": {"total": sum(s.ops.values()), **s.ops},
        "vars": s.vars,
        "params": {"count": s.params, "elements": s.param_elements},
        "stage_meshes": [list(m.process_ids) for m in s.stage_meshes],
        "global_meshes": [list(m.process_ids) for m in s.global_meshes],
        "stages": [
            {
                "stage": s.stage,
                "mesh": list(s.mesh.process_ids),
                "layers": list(s.layers),
                "ops": s.ops,
                "chunks": list(s.chunks),
                "layers_by_chunk": [
                    {"chunk": c.chunk, "layers": list(c.names), "numbers": list(c.numbers)}
                    for c in s.layers_by_chunk
                ],
            }
            for s in s.stages
        ],
        "chunks": list(s.chunks),
        "layout": s.layout,
        "layers": {
            **layers_json(s.layers),
            "note": s.layers_note,
            "names": list(s.layers.names) if s.layers else [],
        },
        "plan": plan_json(s.plan),
        "ops_with_callstack": s.callstack_ops,
        "ops_without_mesh": s.unplaced_ops,
    }


def number_runs(numbers: Sequence[int]) -> str:
    """Layer numbers as runs: `0–7`, `3`, `0–3,8`."""
    runs: list[str] = []
    start = 0
    for i in range(1, len(numbers) + 1):
        if i == len(numbers) or numbers[i] != numbers[i - 1] + 1:
            a, b = numbers[start], numbers[i - 1]
            runs.append(str(a) if a == b else f"{a}–{b}")
            start = i
    return ",".join(runs)


def chunk_ranges(chunks: Sequence[ChunkLayers]) -> str:
    """A stage's layers, chunk by chunk in chunk order: `0–7 | 64–71`."""
    return " | ".join(number_runs(c.numbers) for c in chunks)


def layer_numbers_line(names: Sequence[str]) -> str:
    """What the stage table's layer numbers stand for, first and last few."""
    shown = [f"{k} = {n}" for k, n in enumerate(names)]
    if len(shown) > 3:
        shown = [*shown[:2], "…", shown[-1]]
    return "layer numbers: " + ", ".join(shown)


def render_summary(console: Console, s: Summary) -> None:
    total = sum(s.ops.values())
    roles = ", ".join(f"{n} {k}" for k, n in s.ops.items() if n)
    lines = [
        f"{s.source}: {human_bytes(s.size)}, {s.blocks} block(s), {s.vars} vars",
        f"ops: {total} ({roles})",
        f"parameters: {s.params} ({human(s.param_elements)} elements)",
        f"layout: {s.layout}; chunk ids present: {', '.join(map(str, s.chunks)) or 'none'}",
        f"layers: {s.layers.layer_class} x {len(s.layers)} ({s.layers_note})"
        if s.layers
        else f"layers: not found ({s.layers_note})",
    ]
    if s.layers:
        lines.append(layer_numbers_line(s.layers.names))
    if s.global_meshes:
        lines.append("global meshes (not stages): " + " ".join(str(m) for m in s.global_meshes))
    if s.plan is not None:
        lines.append(
            f"plan: pp {s.plan.pp} x vpp {s.plan.vpp}, {s.plan.placement} placement, "
            f"{s.plan.mode} mode, written by vppctl {s.plan.vppctl_version}"
        )
    if s.callstack_ops:
        lines.append(f"{s.callstack_ops} ops carry op_callstack (--strip-callstack drops them)")
    if s.unplaced_ops:
        lines.append(f"{s.unplaced_ops} ops have no process mesh")
    for line in lines:
        console.print(Text(line))
    table = _table("stages")
    for name, justify in (
        ("Stage", "right"),
        ("Mesh", "left"),
        ("Layers", "left"),
        ("Fwd", "right"),
        ("Bwd", "right"),
        ("Opt", "right"),
        ("Chunks", "left"),
    ):
        table.add_column(name, justify=justify, no_wrap=name != "Layers")  # type: ignore[arg-type]
    for st in s.stages[:TABLE_ROWS]:
        cells = (
            str(st.stage),
            str(st.mesh),
            chunk_ranges(st.layers_by_chunk) or "-",
            str(st.ops["forward"]),
            str(st.ops["backward"]),
            str(st.ops["optimizer"]),
            ",".join(map(str, st.chunks)) or "-",
        )
        table.add_row(*map(Text, cells))
    console.print(table)
    if len(s.stages) > TABLE_ROWS:
        more = len(s.stages) - TABLE_ROWS
        console.print(Text(f"... and {more} more stage(s); --json lists them all"))


# -- simulate: comparison between 1F1B and the interleaved schedule


def _pair(results: Sequence[SimResult]) -> tuple[SimResult, SimResult] | None:
    """The (1F1B, interleaved) pair to compare, if both are present."""
    baseline = next((r for r in results if r.schedule == "1f1b"), None)
    candidate = next((r for r in results if r.schedule == "interleaved" and r.vpp > 1), None)
    if baseline is None or candidate is None:
        return None
    return baseline, candidate


def gain_line(results: Sequence[SimResult]) -> str | None:
    """One sentence with what interleaving buys and costs, or None if nothing to compare."""
    pair = _pair(results)
    if pair is None:
        return None
    base, vpp = pair
    saved = (base.makespan - vpp.makespan) / base.makespan
    memory = vpp.peak_in_flight_stage_units[0] / base.peak_in_flight_stage_units[0]
    return (
        f"{title(vpp)} vs {title(base)}: makespan {number(base.makespan)} -> "
        f"{number(vpp.makespan)} ({percent(saved)} shorter), bubble vs ideal "
        f"{percent(base.bubble_vs_ideal)} -> {percent(vpp.bubble_vs_ideal)}, stage 0 "
        f"activations {stage_units(base, 0)} -> {stage_units(vpp, 0)} stages "
        f"(x{float(memory):.2f})"
    )


# -- simulate: tables


def summary_table(results: Sequence[SimResult]) -> Table:
    """Headline figures, one column per schedule, so the comparison is one glance."""
    first = results[0]
    heading = f"one training step: pp={first.pp}, m={first.micro_batches}"
    if first.p2p_cost:
        heading += f", p2p cost {number(first.p2p_cost)} per hop"
    table = Table(title=heading, title_justify="left")
    table.add_column("")
    for result in results:
        table.add_column(title(result), justify="right")
    rows: list[tuple[str, list[str]]] = [
        ("makespan", [number(r.makespan) for r in results]),
        ("ideal (busiest stage)", [number(r.ideal) for r in results]),
        ("bubble (of makespan)", [percent(r.bubble) for r in results]),
        ("bubble vs ideal", [percent(r.bubble_vs_ideal) for r in results]),
        (
            "peak in-flight, stage 0",
            [f"{r.peak_in_flight[0]} ({stage_units(r, 0)} stages)" for r in results],
        ),
        ("p2p messages", [str(r.p2p_messages) for r in results]),
    ]
    for name, cells in rows:
        table.add_row(name, *cells)
    return table


def stage_table(results: Sequence[SimResult]) -> Table:
    """Per-stage bubble and peak in-flight units, side by side."""
    table = Table(title="per stage", title_justify="left")
    table.add_column("stage", justify="right")
    for result in results:
        table.add_column(f"bubble {title(result)}", justify="right")
        table.add_column("in-flight", justify="right")
    for stage in range(results[0].pp):
        cells: list[str] = []
        for result in results:
            cells.append(percent(result.per_stage_bubble[stage]))
            cells.append(f"{result.peak_in_flight[stage]} ({stage_units(result, stage)})")
        table.add_row(str(stage), *cells)
    return table


def simulation_warnings(results: Sequence[SimResult]) -> list[str]:
    return list(dict.fromkeys(w for r in results for w in r.warnings))


def render_simulation(
    console: Console,
    results: Sequence[SimResult],
    *,
    timeline: bool = True,
    suggest_files: bool = True,
) -> None:
    """Summary and per-stage tables side by side, the gain and the timelines (warnings are
    the caller's, for stderr). `suggest_files`: a scaled timeline points to --svg and
    --trace (off when they are being written)."""
    console.print(summary_table(results))
    console.print(stage_table(results))
    gain = gain_line(results)
    if gain is not None:
        console.print(Text(gain, style="bold"))
    if timeline:
        render_timelines(results, console, suggest_files=suggest_files)


# -- simulate: JSON


def _step_json(step: Step) -> dict[str, Any]:
    return {
        "stage": step.stage,
        "chunk": step.chunk,
        "micro_batch": step.micro_batch,
        "kind": step.kind,
        "start": rounded(step.start),
        "end": rounded(step.end),
    }


def _result_json(result: SimResult, steps: bool) -> dict[str, Any]:
    data: dict[str, Any] = {
        "schedule": result.schedule,
        "pp": result.pp,
        "vpp": result.vpp,
        "micro_batches": result.micro_batches,
        "p2p_cost": rounded(result.p2p_cost),
        "makespan": rounded(result.makespan),
        "ideal": rounded(result.ideal),
        "bubble": rounded(result.bubble),
        "bubble_vs_ideal": rounded(result.bubble_vs_ideal),
        "p2p_messages": result.p2p_messages,
        "per_stage": [
            {
                "stage": stage,
                "bubble": rounded(result.per_stage_bubble[stage]),
                "peak_in_flight": result.peak_in_flight[stage],
                "peak_in_flight_stages": rounded(result.peak_in_flight_stage_units[stage]),
            }
            for stage in range(result.pp)
        ],
        "warnings": list(result.warnings),
        # Exact values for anyone checking closed forms; floats above are rounded.
        "exact": {
            "makespan": str(result.makespan),
            "ideal": str(result.ideal),
            "bubble": str(result.bubble),
            "bubble_vs_ideal": str(result.bubble_vs_ideal),
        },
    }
    if steps:
        data["steps"] = [_step_json(step) for step in result.steps]
    return data


def simulation_json(results: Sequence[SimResult], *, steps: bool = False) -> dict[str, Any]:
    """A json-serialisable dict of the figures; ``steps=True`` adds every step."""
    data: dict[str, Any] = {"results": [_result_json(r, steps) for r in results]}
    pair = _pair(results)
    if pair is not None:
        base, vpp = pair
        data["comparison"] = {
            "baseline": base.schedule,
            "candidate": vpp.schedule,
            "speedup": rounded(base.makespan / vpp.makespan),
            "bubble_vs_ideal": [rounded(base.bubble_vs_ideal), rounded(vpp.bubble_vs_ideal)],
            "stage0_activation_ratio": rounded(
                vpp.peak_in_flight_stage_units[0] / base.peak_in_flight_stage_units[0]
            ),
        }
    return data


# -- dump, sample ----------------------------------------------------------------


def written_json(output: str, bytes_written: int, warnings: Sequence[str]) -> dict[str, Any]:
    return {"output": output, "bytes_written": bytes_written, "warnings": list(warnings)}


def dump_json(o: DumpOutcome) -> dict[str, Any]:
    data = written_json(o.output or "-", o.bytes_written, o.warnings)
    if o.callstack_bytes_saved is not None:
        data["callstack_bytes_saved"] = o.callstack_bytes_saved
    return data


def sample_json(o: SampleOutcome) -> dict[str, Any]:
    return written_json(o.output, o.bytes_written, ())
