"""Report: render results as rich tables (for people) and JSON dicts (for scripts).

Every renderer reads a result object (`ConvertResult`, verify violations, an
inspection summary); none computes anything of its own. Tables fit 80 columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from vppctl.convert import ConvertResult
from vppctl.plan import Plan
from vppctl.summary import Summary
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


def compact_layers(names: Sequence[str]) -> str:
    """`DecoderLayer_4 … DecoderLayer_7 (4)`, or the names when there are one or two."""
    if len(names) <= 2:
        return ", ".join(names)
    return f"{names[0]} … {names[-1]} ({len(names)})"


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


def convert_notes(
    r: ConvertResult, output: str, written: int, bubble: tuple[float, float] | None = None
) -> list[str]:
    p = r.plan
    notes = [
        layers_line(p),
        f"placement: {p.placement}; split: {p.split}",
        f"imbalance: {p.imbalance:.2f} (max/mean segment {p.cost_kind})",
        f"cross-stage edges per micro-batch: {r.edges_before} -> {r.edges_after}",
    ]
    if bubble is not None:
        notes.append(
            f"bubble (1F1B -> interleaved): {bubble[0]:.1%} -> {bubble[1]:.1%} of the step"
        )
    if r.callstack_bytes_saved is not None:
        notes.append(f"stripped op_callstack: {human_bytes(r.callstack_bytes_saved)} saved")
    notes.append(f"wrote {output} ({human_bytes(written)})")
    return notes


def render_convert(
    console: Console,
    r: ConvertResult,
    output: str,
    written: int,
    bubble: tuple[float, float] | None = None,
) -> None:
    # The title is its own line, not the table's title, so that it never wraps to
    # the table's width.
    console.print(Text(convert_title(r)), soft_wrap=True)
    console.print(convert_table(r))
    for line in convert_notes(r, output, written, bubble):
        console.print(Text(line))


def convert_json(
    r: ConvertResult, output: str, written: int, bubble: tuple[float, float] | None = None
) -> dict[str, Any]:
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
        "output": output,
        "bytes_written": written,
        "warnings": list(r.warnings),
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
        out["bubble"] = {"1f1b": round(bubble[0], 6), "interleaved": round(bubble[1], 6)}
    if r.callstack_bytes_saved is not None:
        out["callstack_bytes_saved"] = r.callstack_bytes_saved
    return out


def violations_table(violations: Sequence[Violation]) -> Table:
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
    for v in violations:
        cells = (
            v.rule,
            str(v.block) if v.block >= 0 else "-",
            str(v.op) if v.op >= 0 else "-",
            v.type or "-",
            v.message,
        )
        table.add_row(*map(Text, cells))  # Text: names are not rich markup
    return table


def violations_json(violations: Sequence[Violation], extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "valid": not violations,
        "violations": [
            {"rule": v.rule, "block": v.block, "op": v.op, "type": v.type, "message": v.message}
            for v in violations
        ],
        **extra,
    }


def rules_table() -> Table:
    table = _table()
    table.add_column("Rule", no_wrap=True)
    table.add_column("Checks")
    for rule, text in RULES.items():
        table.add_row(Text(rule), Text(text))
    return table


def render_summary(console: Console, s: Summary) -> None:
    total = sum(s.ops.values())
    roles = ", ".join(f"{n} {k}" for k, n in s.ops.items() if n)
    lines = [
        f"{s.source}: {human_bytes(s.size)}, {s.blocks} block(s), {s.vars} vars",
        f"ops: {total} ({roles})",
        f"parameters: {s.params} ({human(s.param_elements)} elements)",
        f"layout: {s.layout}; chunk ids present: {', '.join(map(str, s.chunks)) or 'none'}",
        f"layers: {s.layer_class} x {s.n_layers} ({s.layers_note})"
        if s.n_layers
        else f"layers: not found ({s.layers_note})",
    ]
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
    for st in s.stages:
        cells = (
            str(st.stage),
            str(st.mesh),
            compact_layers(st.layers) or "-",
            str(st.ops["forward"]),
            str(st.ops["backward"]),
            str(st.ops["optimizer"]),
            ",".join(map(str, st.chunks)) or "-",
        )
        table.add_row(*map(Text, cells))
    console.print(table)
