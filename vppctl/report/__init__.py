"""Report: every table (for people), in one package; the JSON (for scripts) is each
outcome's `to_json()` (`vppctl.outcomes`, `vppctl.verify`, `vppctl.summary`).

Every renderer reads one command's outcome or a result inside it; none computes
anything of its own. Tables fit an 80-column terminal (a pipe gets whole lines:
`vppctl.cli.streams`). `program` renders convert and inspect; `verify` renders verify in
each of its output formats, and the rules; `schedule` renders simulate and plan;
`common` holds what they share, and `plain` what a pipe gets without rich (the convert
report laid out as rich lays it out, and the number formats). Names load on first use:
`vppctl --help` loads no renderer (nor rich), a plain `convert` neither the simulator nor
the planner, nor rich when its report goes to a pipe or a file. The
pictures of a schedule (terminal timeline, SVG, trace) are `vppctl.schedule.timeline`'s.
The JSON Schema of each command's `--json` ships in `schemas/`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vppctl._lazy import face

_NAMES = {
    "BUBBLE_DEFINITION": "common",
    "TABLE_ROWS": "common",
    "compact_layers": "plain",
    "compact_table": "common",
    "human": "plain",
    "human_bytes": "common",
    "iec_short": "plain",
    "picture_columns": "common",
    "printed": "common",
    "convert_grid": "plain",
    "convert_lines": "plain",
    "convert_notes": "plain",
    "convert_table": "program",
    "render_convert": "program",
    "render_summary": "program",
    "concise_lines": "verify",
    "github_lines": "verify",
    "junit_xml": "verify",
    "pir_rules_table": "verify",
    "render_verify": "verify",
    "rules_table": "verify",
    "statistics_table": "verify",
    "verify_line": "verify",
    "violations_table": "verify",
    "render_plan": "schedule",
    "render_simulation": "schedule",
}
__all__ = [
    "BUBBLE_DEFINITION",
    "TABLE_ROWS",
    "compact_layers",
    "compact_table",
    "concise_lines",
    "convert_grid",
    "convert_lines",
    "convert_notes",
    "convert_table",
    "github_lines",
    "human",
    "human_bytes",
    "iec_short",
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
__getattr__, __dir__ = face(__name__, _NAMES, globals())

if TYPE_CHECKING:
    from vppctl.report.common import (
        BUBBLE_DEFINITION,
        TABLE_ROWS,
        compact_table,
        human_bytes,
        picture_columns,
        printed,
    )
    from vppctl.report.plain import (
        compact_layers,
        convert_grid,
        convert_lines,
        convert_notes,
        human,
        iec_short,
    )
    from vppctl.report.program import (
        convert_table,
        render_convert,
        render_summary,
    )
    from vppctl.report.schedule import render_plan, render_simulation
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
