"""PIR launch: how a planned split runs on Paddle 3.x's PIR pipeline, one of three ways.

- **strategy only**: Paddle's own completion makes the split (`vppctl.planner.pir`: a
  loop-placed split whose stages' chunks hold their layers dealt round-robin). The
  `strategy.pipeline` settings are all it takes, with the model putting each layer on
  the stage mesh that produces the split (said per layer: `layers 0–5 on stage 0's mesh`);
- **with `vppctl.paddle.pir_plan`**: any other loop-placed split at vpp >= 2. `vppctl
  convert` writes its plan, and two lines of the training script make Paddle's own
  completion follow it, the model as it is:

      with vppctl.paddle.pir_plan("prog.vpp.json"):
          dist_model.train()

- **cannot**, with the reason: a V placement (Paddle's PIR VPP pass runs no V-shaped
  schedule).

Per candidate, Paddle's launch settings are then the PIR strategy (the same
`strategy.pipeline` fields either way), or why Paddle's PIR pipeline cannot run its
schedule (`vppctl.planner.pir.pir_mode`). Pure: plain values in and out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Literal

from vppctl.planner.launch import LaunchCandidate, Settings, paddle_fields
from vppctl.planner.pir import PirInput, PirMismatch, PirSplit, pir_mode, pir_split

PirHow = Literal["strategy", "pir_plan", "cannot"]
PIR_HOWS: tuple[PirHow, ...] = ("strategy", "pir_plan", "cannot")


@dataclass(frozen=True)
class PirLaunch:
    """How a split runs on Paddle's PIR pipeline: `how`, and what to do (`text`; the
    lines of Python for `pir_plan`), or why it cannot (`reason`)."""

    how: PirHow
    text: str  # one line, for a person
    python: tuple[str, ...] = ()  # pir_plan: the lines the training script takes
    reason: str | None = None  # cannot: why

    @property
    def runs(self) -> bool:
        return self.how != "cannot"


def pir_split_launch(split: PirSplit, plan_file: str, convert: Sequence[str] = ()) -> PirLaunch:
    """How `split` (`vppctl.planner.pir.pir_split` of a plan) runs on Paddle's PIR
    pipeline. `plan_file` is where `convert` (its argv, when known) writes the plan."""
    if split.takes:
        meshes = stage_mesh_text(split.stage_layers)
        return PirLaunch("strategy", f"strategy only: {meshes}; {_dealt(split)}")
    vpp = len(split.chunk_layers[0]) if split.chunk_layers else 1
    placement_refused = split.reason is not None and "placement" in split.reason
    if placement_refused or vpp < 2:
        reason = split.reason or "Paddle's PIR completion runs for vpp_degree >= 2 only"
        return PirLaunch("cannot", f"cannot: {reason}", reason=reason)
    python = pir_plan_lines(plan_file)
    command = f"`{' '.join(convert)}`, then " if convert else ""
    return PirLaunch(
        "pir_plan",
        f"with vppctl.paddle.pir_plan: {command}`{python[0]} {python[1].strip()}` (the model "
        "as it is; Paddle's completion alone cannot make this split)",
        python=python,
    )


def plan_file_of(source: str) -> str:
    """Where `vppctl convert SOURCE` writes a PIR program's plan without -o: SOURCE with
    `.vpp` before the extension (`prog.json` -> `prog.vpp.json`; vppctl.commands'
    default output)."""
    path = PurePath(source)
    name = f"{path.stem}.vpp{path.suffix}" if path.suffix else f"{path.name}.vpp"
    return str(path.with_name(name))


def pir_plan_lines(plan_file: str) -> tuple[str, ...]:
    """The two lines of a training script that build the train program under the plan."""
    return (f'with vppctl.paddle.pir_plan("{plan_file}"):', "    dist_model.train()")


def stage_mesh_text(stage_layers: Sequence[int]) -> str:
    """`layers 0–5 on stage 0's mesh, 6–11 on stage 1's`: which stage mesh each layer is
    built on, so that Paddle's completion makes the split."""
    parts, first = [], 0
    for s, n in enumerate(stage_layers):
        last = first + n - 1
        layers = "none" if n == 0 else str(first) if n == 1 else f"{first}–{last}"
        parts.append(f"{layers} on stage {s}'s mesh" if s == 0 else f"{layers} on stage {s}'s")
        first += n
    return "layers " + ", ".join(parts)


def _dealt(split: PirSplit) -> str:
    vpp = len(split.chunk_layers[0]) if split.chunk_layers else 1
    held = "the program's own" if not split.moves_layers else "not the program's"
    if vpp == 1:
        return f"plain PP, vpp_degree 1 ({held} stage meshes)"
    dealt = " | ".join("+".join(map(str, chunks)) for chunks in split.chunk_layers)
    return f"vpp_degree {vpp} deals them {dealt} ({held} stage meshes)"


def candidate_pir_launch(
    c: LaunchCandidate, pir: PirInput, plan_file: str, convert: Sequence[str] = ()
) -> PirLaunch:
    """`pir_launch` of a candidate's split."""
    split = pir_split(c.pp, c.vpp, c.placement, c.layers_per_segment, pir.stage_layers)
    return pir_split_launch(split, plan_file, convert)


def pir_plan_settings(
    c: LaunchCandidate, pir: PirInput, plan_file: str, convert: Sequence[str] = ()
) -> Settings | None:
    """Paddle's launch settings for a candidate whose split runs with `pir_plan` (None
    for any other: `vppctl.planner.pir.pir_paddle_settings` says those): the PIR strategy
    and, in the note, the plan and the two lines; or why Paddle cannot run its schedule."""
    launch = candidate_pir_launch(c, pir, plan_file, convert)
    if launch.how != "pir_plan":
        return None
    mode = pir_mode(c)
    if isinstance(mode, PirMismatch):
        return Settings("paddle", False, (), mode.reason)
    note = f"a PIR program: {launch.text}"
    return Settings("paddle", True, paddle_fields(c, mode, pir.vpp_seg_method), note)
