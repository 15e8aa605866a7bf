"""Pipeline schedules: each schedule's per-stage orders, the simulator, and its pictures.

The pure side of vppctl: it needs no program, only stage and chunk counts and a
cost per virtual stage, and imports nothing of vppctl's but the plan (`vppctl.plan`)
and the bottom layer (`choices`, `errors`, `escape`, `units`): the layers contract keeps it so.
`orders` says in which order each stage runs its actions, `runtimes` which runtime runs
which schedule and the rules each applies (`preflight`), `arguments` checks a
simulation's inputs, `refusal` is the error of counts a runtime refuses (with the short
reason `plan` counts them by), `execute` places the actions in time (`actions`, `interleaving`
and `vshape` hold the orders' vocabulary and the interleaving and V-shaped
families), `results` holds what comes out, `simulation` is the one call
(`simulate`), `timeline` draws it (terminal, SVG, Chrome trace) and `torchcsv`
reads and writes torch.distributed.pipelining's schedule CSV.
What a program's segments cost, and its memory, is `vppctl.planner`'s. Names
load on first use: the command line reads the schedule names without loading
the simulator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vppctl._lazy import face

_NAMES = {
    "MAX_UNITS": "arguments",
    "OVER_MAX_UNITS": "arguments",
    "check_size": "arguments",
    "parse_unit_costs": "arguments",
    "ScheduleRefused": "refusal",
    "Pipeline": "execute",
    "held_peak": "execute",
    "GROUPED": "orders",
    "LOOPED": "orders",
    "MERGED": "orders",
    "SCHEDULES": "orders",
    "SCHEDULE_NAMES": "orders",
    "SPLIT": "orders",
    "V_SHAPED": "orders",
    "Op": "orders",
    "Schedule": "orders",
    "legal_group_sizes": "orders",
    "natural_placement": "orders",
    "stage_orders": "orders",
    "DeadlockError": "results",
    "SimResult": "results",
    "SimulationError": "results",
    "Step": "results",
    "compare": "simulation",
    "interleaving_schedule": "simulation",
    "simulate": "simulation",
    "simulate_orders": "simulation",
    "DEFAULT_WIDTH": "timeline",
    "number": "timeline",
    "percent": "timeline",
    "render_timelines": "timeline",
    "rounded": "timeline",
    "stage_units": "timeline",
    "to_chrome_trace": "timeline",
    "to_svg": "timeline",
    "HOME": "runtimes",
    "RULE": "runtimes",
    "RULES": "runtimes",
    "RUNTIME_NAMES": "runtimes",
    "RUNTIME_SCHEDULES": "runtimes",
    "Counts": "runtimes",
    "Rule": "runtimes",
    "check_runtime": "runtimes",
    "comparison": "runtimes",
    "default_group_size": "runtimes",
    "not_in_runtime": "runtimes",
    "pir_split_rule": "runtimes",
    "preflight": "runtimes",
    "split_refusal": "runtimes",
    "rules_runtime": "runtimes",
    "runtime_line": "runtimes",
    "MEGATRON_SCHEDULES": "runtimes",
    "PADDLE_LEGACY_VPP": "runtimes",
    "PADDLE_MODES": "runtimes",
    "PADDLE_SCHEDULE_MODES": "runtimes",
    "TORCH_CLASSES": "runtimes",
    "paddle_legacy_refusal": "runtimes",
    "torch_group_size": "interleaving",
    "torch_rounds": "interleaving",
    "PADDLE_RUNTIMES": "zbvpp",
    "parse_csv": "torchcsv",
    "to_csv": "torchcsv",
}
__all__ = [
    "DEFAULT_WIDTH",
    "GROUPED",
    "HOME",
    "LOOPED",
    "MAX_UNITS",
    "MEGATRON_SCHEDULES",
    "MERGED",
    "OVER_MAX_UNITS",
    "PADDLE_LEGACY_VPP",
    "PADDLE_MODES",
    "PADDLE_RUNTIMES",
    "PADDLE_SCHEDULE_MODES",
    "RULE",
    "RULES",
    "RUNTIME_NAMES",
    "RUNTIME_SCHEDULES",
    "SCHEDULES",
    "SCHEDULE_NAMES",
    "SPLIT",
    "TORCH_CLASSES",
    "V_SHAPED",
    "Counts",
    "DeadlockError",
    "Op",
    "Pipeline",
    "Rule",
    "Schedule",
    "ScheduleRefused",
    "SimResult",
    "SimulationError",
    "Step",
    "check_runtime",
    "check_size",
    "compare",
    "comparison",
    "default_group_size",
    "held_peak",
    "interleaving_schedule",
    "legal_group_sizes",
    "natural_placement",
    "not_in_runtime",
    "number",
    "paddle_legacy_refusal",
    "parse_csv",
    "parse_unit_costs",
    "percent",
    "pir_split_rule",
    "preflight",
    "render_timelines",
    "rounded",
    "rules_runtime",
    "runtime_line",
    "simulate",
    "simulate_orders",
    "split_refusal",
    "stage_orders",
    "stage_units",
    "to_chrome_trace",
    "to_csv",
    "to_svg",
    "torch_group_size",
    "torch_rounds",
]
__getattr__, __dir__ = face(__name__, _NAMES, globals())

if TYPE_CHECKING:
    from vppctl.schedule.arguments import MAX_UNITS, OVER_MAX_UNITS, check_size, parse_unit_costs
    from vppctl.schedule.execute import Pipeline, held_peak
    from vppctl.schedule.interleaving import torch_group_size, torch_rounds
    from vppctl.schedule.orders import (
        GROUPED,
        LOOPED,
        MERGED,
        SCHEDULE_NAMES,
        SCHEDULES,
        SPLIT,
        V_SHAPED,
        Op,
        Schedule,
        legal_group_sizes,
        natural_placement,
        stage_orders,
    )
    from vppctl.schedule.refusal import ScheduleRefused
    from vppctl.schedule.results import DeadlockError, SimResult, SimulationError, Step
    from vppctl.schedule.runtimes import (
        HOME,
        MEGATRON_SCHEDULES,
        PADDLE_LEGACY_VPP,
        PADDLE_MODES,
        PADDLE_SCHEDULE_MODES,
        RULE,
        RULES,
        RUNTIME_NAMES,
        RUNTIME_SCHEDULES,
        TORCH_CLASSES,
        Counts,
        Rule,
        check_runtime,
        comparison,
        default_group_size,
        not_in_runtime,
        paddle_legacy_refusal,
        pir_split_rule,
        preflight,
        rules_runtime,
        runtime_line,
        split_refusal,
    )
    from vppctl.schedule.simulation import (
        compare,
        interleaving_schedule,
        simulate,
        simulate_orders,
    )
    from vppctl.schedule.timeline import (
        DEFAULT_WIDTH,
        number,
        percent,
        render_timelines,
        rounded,
        stage_units,
        to_chrome_trace,
        to_svg,
    )
    from vppctl.schedule.torchcsv import parse_csv, to_csv
    from vppctl.schedule.zbvpp import PADDLE_RUNTIMES
