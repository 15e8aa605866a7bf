"""Report: every table (for people), in one package; the JSON (for scripts) is each
outcome's `to_json()` (`vppctl.outcomes`, `vppctl.verify`, `vppctl.summary`).

Every renderer reads one command's outcome or a result inside it; none computes
anything of its own. Tables fit an 80-column terminal (a pipe gets whole lines:
`vppctl.cli.streams`). `program` renders convert and inspect; `verify` renders verify in
each of its output formats, and the rules; `schedule` renders simulate and plan, and
its names load on first use (a plain `convert` never needs the simulator or the
planner); `common` holds what they share. The pictures of a schedule (terminal
timeline, SVG, trace) are `vppctl.schedule.timeline`'s. The JSON Schema of each
command's `--json` ships in `schemas/`.
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
    picture_columns,
    printed,
)
from vppctl.report.program import (
    convert_notes,
    convert_table,
    render_convert,
    render_summary,
)
from vppctl.report.verify import (
    concise_lines,
    github_lines,
    junit_xml,
    pir_rules_table,
    render_verify,
    rules_table,
    statistics_table,
    verify_line,
    violations_table,
)

if TYPE_CHECKING:
    from vppctl.report.schedule import render_plan, render_simulation

__all__ = [
    "BUBBLE_DEFINITION",
    "TABLE_ROWS",
    "compact_layers",
    "compact_table",
    "concise_lines",
    "convert_notes",
    "convert_table",
    "github_lines",
    "human",
    "human_bytes",
    "junit_xml",
    "picture_columns",
    "pir_rules_table",
    "printed",
    "render_convert",
    "render_plan",
    "render_simulation",
    "render_summary",
    "render_verify",
    "rules_table",
    "statistics_table",
    "verify_line",
    "violations_table",
]

_SCHEDULE = {name: "schedule" for name in ("render_plan", "render_simulation")}
__getattr__, __dir__ = face(__name__, _SCHEDULE, globals())
