"""Results: what a simulated training step is made of (steps in time, the figures).

`Step` is one action placed in time; `SimResult` holds every step of one schedule
and the figures measured from them (makespan, bubble, in-flight peaks). The
errors a simulation can raise are here too, so that the executor
(`vppctl.schedule.execute`) and the entry points (`vppctl.schedule.simulation`)
share them.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from vppctl.errors import EXIT_CONVERT, ConversionError
from vppctl.plan import Placement
from vppctl.schedule.actions import Kind, Op
from vppctl.schedule.orders import SCHEDULE_NAMES, Schedule, order_names


class SimulationError(ConversionError):
    """The simulation cannot run: bad arguments or a schedule that deadlocks."""

    exit_code = EXIT_CONVERT


class DeadlockError(SimulationError):
    """A stage's next action waits for a step that can never run."""

    def __init__(self, stage: int, op: str, waits_for: str, waits_on_stage: int) -> None:
        self.stage = stage
        self.op = op
        self.waits_for = waits_for
        self.waits_on_stage = waits_on_stage
        super().__init__(
            f"deadlock: stage {stage} cannot run {op}: it waits for {waits_for} on stage "
            f"{waits_on_stage}, which can never run first; reorder the schedule or use a "
            "supported --schedule"
        )


@dataclass(frozen=True)
class Step:
    """One action placed in time on a stage."""

    stage: int
    chunk: int
    micro_batch: int
    kind: Kind
    start: Fraction
    end: Fraction
    virtual_stage: int

    @property
    def label(self) -> str:
        """Short name, e.g. ``B0.c2``."""
        return f"{self.kind}{self.micro_batch}.c{self.chunk}"

    @property
    def action(self) -> str:
        """torch.distributed.pipelining notation, e.g. ``3I1``."""
        return f"{self.virtual_stage}{self.kind}{self.micro_batch}"

    @property
    def duration(self) -> Fraction:
        return self.end - self.start


@dataclass(frozen=True)
class SimResult:
    """What one simulated training step looks like.

    ``vpp`` is the number of chunks per stage *as simulated*: the merged schedules
    (``fthenb``, ``1f1b``, ``eager1f1b``, ``zbh1``, ``zb1p``) run each stage's chunks as
    one and carry ``vpp == 1``; ``plan_vpp`` is the chunk count the costs were given for.

    * ``makespan``: time from the first action's start to the last one's end.
    * ``ideal``: compute time of the busiest stage (the makespan with no bubble).
    * ``bubble``: idle time of all stages over ``pp x makespan`` (the convention).
    * ``bubble_vs_ideal``: ``(makespan - ideal) / ideal``, Megatron's form.
    * ``per_stage_bubble``: each stage's idle share of the makespan.
    * ``per_stage_idle``: each stage's idle time, in cost units.
    * ``peak_in_flight``: per stage, the most (micro-batch, chunk) units in flight at
      once (module docstring); ``peak_in_flight_per_chunk[stage][chunk]`` the most of
      one chunk's micro-batches in flight on that stage.
    * ``p2p_messages``: sends between different stages in the whole step.
    * ``ops``: every stage's action order; ``orders`` the same in torch notation.
    * ``work``: actions the executor examined (at most twice the steps: linear).
    """

    schedule: Schedule
    pp: int
    vpp: int
    micro_batches: int
    makespan: Fraction
    ideal: Fraction
    bubble: Fraction
    bubble_vs_ideal: Fraction
    per_stage_bubble: tuple[Fraction, ...]
    peak_in_flight: tuple[int, ...]
    p2p_messages: int
    steps: tuple[Step, ...]
    warnings: tuple[str, ...]
    p2p_cost: Fraction = Fraction(0)
    placement: Placement = "loop"
    plan_vpp: int = 1
    group_size: int | None = None
    per_stage_idle: tuple[Fraction, ...] = ()
    peak_in_flight_per_chunk: tuple[tuple[int, ...], ...] = ()
    ops: tuple[tuple[Op, ...], ...] = ()
    work: int = 0

    @property
    def title(self) -> str:
        """Human name of the result, e.g. ``interleaved 1F1B (v=2)``."""
        return f"{SCHEDULE_NAMES.get(self.schedule, self.schedule)} (v={self.vpp})"

    @property
    def orders(self) -> tuple[tuple[str, ...], ...]:
        """Every stage's order as torch action strings (``2F0``, ``1B3``, ``3I1``)."""
        return order_names(self.ops, self.vpp, self.placement)

    @property
    def stage_imbalance(self) -> Fraction:
        """The busiest stage's compute over the mean stage's (1 = even). The other stages
        idle for the difference whatever the schedule: the part of the bubble that only a
        better split removes."""
        busy = [self.makespan - idle for idle in self.per_stage_idle]
        mean = Fraction(sum(busy), len(busy)) if busy else Fraction(0)
        return self.ideal / mean if mean else Fraction(1)

    @property
    def peak_in_flight_stage_units(self) -> tuple[Fraction, ...]:
        """Peak in-flight activations in units of one full stage's activations.

        A chunk holds ``1 / vpp`` of its stage's layers, so (with chunks of equal
        activation size) ``vpp`` in-flight units cost as much memory as one micro-batch
        in flight under plain 1F1B. This is the figure to compare across schedules.
        """
        return tuple(Fraction(peak, self.vpp) for peak in self.peak_in_flight)
