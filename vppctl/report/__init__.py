"""Report: every table (for people) and every JSON shape (for scripts), in one package.

Every renderer reads one command's outcome (`vppctl.commands`) or a result inside
it; none computes anything of its own. Tables fit an 80-column terminal (a pipe gets
whole lines: `vppctl.cli.streams`). `program` renders convert, inspect, dump and
sample; `verify` renders verify in each of its output formats, and the rules;
`schedule` renders simulate and plan, and its names load on first use (a plain
`convert` never needs the simulator or the planner); `common` holds what they share.
The pictures of a schedule (terminal timeline, SVG, trace) are
`vppctl.schedule.timeline`'s.
"""

from typing import TYPE_CHECKING

from vppctl._lazy import face
from vppctl.report.common import (
    BUBBLE_DEFINITION,
    SCHEMAS,
    TABLE_ROWS,
    compact_layers,
    compact_table,
    document,
    human,
    human_bytes,
    layers_json,
    picture_columns,
    printed,
)
from vppctl.report.program import (
    convert_json,
    convert_notes,
    convert_table,
    dump_json,
    recorded_plan_json,
    render_convert,
    render_summary,
    sample_json,
    summary_json,
)
from vppctl.report.verify import (
    concise_lines,
    github_lines,
    junit_xml,
    pir_rules_table,
    render_verify,
    rules_json,
    rules_table,
    statistics_table,
    verify_json,
    verify_line,
    violations_table,
)

if TYPE_CHECKING:
    from vppctl.report.schedule import (
        over_memory_limit,
        plan_json,
        render_plan,
        render_simulation,
        simulation_json,
        simulation_warnings,
        stages_over_limit,
    )

__all__ = [
    "BUBBLE_DEFINITION",
    "SCHEMAS",
    "TABLE_ROWS",
    "compact_layers",
    "compact_table",
    "concise_lines",
    "convert_json",
    "convert_notes",
    "convert_table",
    "document",
    "dump_json",
    "github_lines",
    "human",
    "human_bytes",
    "junit_xml",
    "layers_json",
    "over_memory_limit",
    "picture_columns",
    "pir_rules_table",
    "plan_json",
    "printed",
    "recorded_plan_json",
    "render_convert",
    "render_plan",
    "render_simulation",
    "render_summary",
    "render_verify",
    "rules_json",
    "rules_table",
    "sample_json",
    "simulation_json",
    "simulation_warnings",
    "stages_over_limit",
    "statistics_table",
    "summary_json",
    "verify_json",
    "verify_line",
    "violations_table",
]

_SCHEDULE = {
    name: "schedule"
    for name in (
        "over_memory_limit",
        "plan_json",
        "render_plan",
        "render_simulation",
        "simulation_json",
        "simulation_warnings",
        "stages_over_limit",
    )
}
__getattr__, __dir__ = face(__name__, _SCHEDULE, globals())
