"""The planner: the program-facing side of the schedules.

Which plan a program is simulated with and what each of its segments costs
(`costs`), how many bytes each stage holds (`memory`), a plan's step simulated with
its costs and memory, the one path `simulate`, `convert --micro-batches` and the
search take (`simulate`), `plan`'s search over conversions and schedules (`search`),
how to launch a candidate under Paddle, Megatron-Core and torch (`launch`), and the
Paddle PIR strategy that runs a plan, or why Paddle's PIR completion cannot (`pir`).
It sits above the conversion engine (it plans programs as `convert` does) and the
pure simulator (`vppctl.schedule`). Names load on first use: a plain `convert` loads
none of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vppctl._lazy import face

_NAMES = {
    "CostModel": "costs",
    "Measure": "costs",
    "ResolvedPlan": "costs",
    "resolve_plan": "costs",
    "ChunkMemory": "memory",
    "MemoryModel": "memory",
    "MemoryOptions": "memory",
    "SegmentMemory": "memory",
    "StageMemory": "memory",
    "iec": "memory",
    "parse_size": "memory",
    "stage_memory": "memory",
    "worst_stage": "memory",
    "PIR_MODES": "pir",
    "PIR_SCHEDULE_MODES": "pir",
    "PirInput": "pir",
    "PirMismatch": "pir",
    "PirSplit": "pir",
    "PirStrategy": "pir",
    "pir_launch_settings": "pir",
    "pir_split": "pir",
    "LaunchCandidate": "launch",
    "Settings": "launch",
    "launch_settings": "launch",
    "megatron_layout": "launch",
    "Bubble": "simulate",
    "ProgramModel": "simulate",
    "SimulateOptions": "simulate",
    "SimulatedPlan": "simulate",
    "Simulation": "simulate",
    "SizedPlan": "simulate",
    "converted_bubble": "simulate",
    "cost_ratios": "simulate",
    "simulate_counts": "simulate",
    "simulate_program": "simulate",
    "simulate_schedules": "simulate",
    "Candidate": "search",
    "Conversion": "search",
    "NoPlanFits": "search",
    "PlanResult": "search",
    "PlanSearchOptions": "search",
    "convert_command": "search",
    "search_plans": "search",
    "shell": "search",
}
__all__ = [
    "PIR_MODES",
    "PIR_SCHEDULE_MODES",
    "Bubble",
    "Candidate",
    "ChunkMemory",
    "Conversion",
    "CostModel",
    "LaunchCandidate",
    "Measure",
    "MemoryModel",
    "MemoryOptions",
    "NoPlanFits",
    "PirInput",
    "PirMismatch",
    "PirSplit",
    "PirStrategy",
    "PlanResult",
    "PlanSearchOptions",
    "ProgramModel",
    "ResolvedPlan",
    "SegmentMemory",
    "Settings",
    "SimulateOptions",
    "SimulatedPlan",
    "Simulation",
    "SizedPlan",
    "StageMemory",
    "convert_command",
    "converted_bubble",
    "cost_ratios",
    "iec",
    "launch_settings",
    "megatron_layout",
    "parse_size",
    "pir_launch_settings",
    "pir_split",
    "resolve_plan",
    "search_plans",
    "shell",
    "simulate_counts",
    "simulate_program",
    "simulate_schedules",
    "stage_memory",
    "worst_stage",
]
__getattr__, __dir__ = face(__name__, _NAMES, globals())

if TYPE_CHECKING:
    from vppctl.planner.costs import CostModel, Measure, ResolvedPlan, resolve_plan
    from vppctl.planner.launch import (
        LaunchCandidate,
        Settings,
        launch_settings,
        megatron_layout,
    )
    from vppctl.planner.memory import (
        ChunkMemory,
        MemoryModel,
        MemoryOptions,
        SegmentMemory,
        StageMemory,
        iec,
        parse_size,
        stage_memory,
        worst_stage,
    )
    from vppctl.planner.pir import (
        PIR_MODES,
        PIR_SCHEDULE_MODES,
        PirInput,
        PirMismatch,
        PirSplit,
        PirStrategy,
        pir_launch_settings,
        pir_split,
    )
    from vppctl.planner.search import (
        Candidate,
        Conversion,
        NoPlanFits,
        PlanResult,
        PlanSearchOptions,
        convert_command,
        search_plans,
        shell,
    )
    from vppctl.planner.simulate import (
        Bubble,
        ProgramModel,
        SimulatedPlan,
        SimulateOptions,
        Simulation,
        SizedPlan,
        converted_bubble,
        cost_ratios,
        simulate_counts,
        simulate_program,
        simulate_schedules,
    )
