"""Report: every table (for people) and every JSON shape (for scripts), in one package.

Every renderer reads one command's outcome (`vppctl.commands`) or a result inside
it; none computes anything of its own. Tables fit 80 columns. `program` renders
convert, verify, inspect, dump and sample; `schedule` renders simulate and plan,
and its names load on first use (a plain `convert` never needs the simulator or
the planner); `common` holds what they share. The pictures of a schedule
(terminal timeline, SVG, trace) are `vppctl.schedule.timeline`'s.
"""

from typing import TYPE_CHECKING

from vppctl._lazy import face
from vppctl.report.common import (
    BUBBLE_DEFINITION,
    TABLE_ROWS,
    compact_layers,
    compact_table,
    human,
    human_bytes,
    layers_json,
)
from vppctl.report.program import (
    convert_json,
    convert_notes,
    convert_table,
    dump_json,
    pir_rules_table,
    recorded_plan_json,
    render_convert,
    render_summary,
    render_verify,
    rules_table,
    sample_json,
    summary_json,
    verify_json,
    verify_line,
    violations_table,
)

if TYPE_CHECKING:
    from vppctl.report.schedule import (
        plan_json,
        render_plan,
        render_simulation,
        simulation_json,
        simulation_warnings,
    )

__all__ = [
    "BUBBLE_DEFINITION",
    "TABLE_ROWS",
    "compact_layers",
    "compact_table",
    "convert_json",
    "convert_notes",
    "convert_table",
    "dump_json",
    "human",
    "human_bytes",
    "layers_json",
    "pir_rules_table",
    "plan_json",
    "recorded_plan_json",
    "render_convert",
    "render_plan",
    "render_simulation",
    "render_summary",
    "render_verify",
    "rules_table",
    "sample_json",
    "simulation_json",
    "simulation_warnings",
    "summary_json",
    "verify_json",
    "verify_line",
    "violations_table",
]

_SCHEDULE = {
    name: "schedule"
    for name in (
        "plan_json",
        "render_plan",
        "render_simulation",
        "simulation_json",
        "simulation_warnings",
    )
}
__getattr__, __dir__ = face(__name__, _SCHEDULE, globals())
