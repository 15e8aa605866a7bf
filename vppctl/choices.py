"""Choices: every name a user picks from, once, as a `Literal` type and its values.

The command line's choices, the verifier's known names, the planner's search
space and the option checks of the Python API are all derived from these types
(`typing.get_args`), so a name added here is known everywhere. The module is
imported by `vppctl --help`: it holds nothing else.
"""

from __future__ import annotations

from typing import Literal, get_args

# How segments are dealt to stages (vppctl.plan.place).
Placement = Literal["loop", "v"]
# How layers are split into segments (vppctl.plan).
Split = Literal["uniform", "keep", "balanced", "explicit"]
# What a layer costs, for the balanced split and the table (vppctl.engine.cost).
CostKind = Literal["params", "ops", "flops"]
# How a program was converted: auto (plain PP, layers move), manual (already interleaved).
Mode = Literal["auto", "manual"]
# The pipeline schedules vppctl simulates (vppctl.schedule.orders): Paddle's schedule_mode
# names in lower case first, then torch's and Megatron-Core's where Paddle has none.
Schedule = Literal[
    "fthenb",
    "1f1b",
    "eager1f1b",
    "vpp",
    "zbh1",
    "zbvpp",
    "interleaved",
    "zb1p",
    "interleaved-zb",
    "zbv",
    "dualpipev",
]
# What measured costs (--costs-from) do with a layer or stage they do not measure: refuse
# it, or take it from the program's estimate scaled to the measured ones.
Fill = Literal["none", "estimate"]
# The runtimes whose rules `plan`, `simulate` and `convert -m` apply (vppctl.schedule.runtimes):
# Paddle 3.0.0 on a legacy ProgramDesc, Paddle 3.3.1 on a PIR program, Megatron-Core, torch's
# pipelining, or any of them (each schedule under the runtime whose order it is).
Runtime = Literal["paddle", "paddle-pir", "megatron", "torch", "any"]
# The device and link a pipeline hop is timed on (vppctl.planner.costs.LINKS).
Link = Literal["h100-nvlink", "h100-ib", "a100-nvlink", "a100-ib"]
# The sample generator's layer layout and optimizer (vppctl.sample).
Layout = Literal["blocked", "interleaved"]
Optimizer = Literal["adamw", "sgd", "none"]
# What `vppctl inspect` finds a program laid out for (vppctl.summary).
ProgramLayout = Literal["plain", "interleaved", "unannotated"]
# The formats of `vppctl verify`'s report: a table, one line per violation, JSON, GitHub
# Actions workflow commands, a JUnit XML report (vppctl.report.verify).
OutputFormat = Literal["full", "concise", "json", "github", "junit"]

PLACEMENTS: tuple[Placement, ...] = get_args(Placement)
SPLITS: tuple[Split, ...] = get_args(Split)
COST_KINDS: tuple[CostKind, ...] = get_args(CostKind)
MODES: tuple[Mode, ...] = get_args(Mode)
SCHEDULES: tuple[Schedule, ...] = get_args(Schedule)
FILLS: tuple[Fill, ...] = get_args(Fill)
RUNTIMES: tuple[Runtime, ...] = get_args(Runtime)
LINKS: tuple[Link, ...] = get_args(Link)
LAYOUTS: tuple[Layout, ...] = get_args(Layout)
OPTIMIZERS: tuple[Optimizer, ...] = get_args(Optimizer)
PROGRAM_LAYOUTS: tuple[ProgramLayout, ...] = get_args(ProgramLayout)
OUTPUT_FORMATS: tuple[OutputFormat, ...] = get_args(OutputFormat)
# The splits `vppctl plan` searches (explicit counts are given, not searched).
SEARCHED_SPLITS: tuple[Split, ...] = tuple(s for s in SPLITS if s != "explicit")

# The most stages or chunks per stage: no real job has more; larger values are typos.
MAX_DEGREE = 4096
# The most micro-batches per step, and the largest micro-batch size or sequence length.
MAX_MICRO_BATCHES = 1 << 16
MAX_BATCH_DIM = 1 << 24
# The narrowest and the widest the SVG timeline may be asked to be, in pixels.
MIN_SVG_WIDTH, MAX_SVG_WIDTH = 640, 100_000
# The most decoder layers of a program (a sample, a segment's layer count).
MAX_LAYERS = 10_000_000
