"""The options several commands share, declared once: names, types, choices and help.

Every choice is derived from its `Literal` type in `vppctl.choices`, so the command
line offers exactly the names the library knows. The plan options (`--pp`,
`--vpp`, `--placement`, `--split`, `--layers-per-chunk`, `--layout`, `--cost`,
`--seg-method`) mean the same in `convert` and `simulate`; only what each takes
by default differs (`simulate` replays a converted program's recorded plan).
`plan` takes lists of the same names.

Choices take any case (`--placement V`, `--schedule ZBV`, as the docs write them) and
normalise to the one token; shell completion offers their values, for the comma lists
of `plan` too (`--schedule 1f1b,<TAB>`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import click

import vppctl.planner
from vppctl import validate
from vppctl.choices import (
    COST_KINDS,
    FILLS,
    LINKS,
    MAX_BATCH_DIM,
    MAX_DEGREE,
    MAX_MICRO_BATCHES,
    PLACEMENTS,
    RUNTIMES,
    SPLITS,
)

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem

F = TypeVar("F", bound=Callable[..., Any])


class Choice(click.Choice):  # type: ignore[type-arg]
    """One of `values`, in any case, as its token. A value that is none of them is passed
    on as typed, for the options object it goes into to refuse (`vppctl.validate`): the
    command line and the Python API say a bad value in the same words."""

    def __init__(self, values: Sequence[str]) -> None:
        super().__init__(values, case_sensitive=False)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return _token(value, self.choices)


def _token(value: Any, choices: Sequence[Any]) -> Any:
    if isinstance(value, str) and value.lower() in choices:
        return value.lower()
    return value


def choice(values: Sequence[str]) -> click.Choice[str]:
    """One of `values` (an options object's choice), in any case, as its token."""
    return Choice(values)


class ChoiceList(click.ParamType):  # type: ignore[type-arg]
    """A comma-separated list of choices (`loop,v`), in any case, as a tuple of tokens;
    shell completion offers the next value after the last comma. A name that is none of
    them is passed on for the options object to refuse, as `Choice` does."""

    name = "choices"

    def __init__(self, choices: Sequence[str]) -> None:
        self.choices = tuple(choices)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, tuple):
            return value
        values = tuple(_token(x, self.choices) for x in str(value).replace(" ", "").split(",") if x)
        if not values:
            self.fail(
                f"{value!r}: give at least one of {', '.join(self.choices)} (comma-separated)"
            )
        return values

    def shell_complete(
        self, ctx: click.Context, param: click.Parameter, incomplete: str
    ) -> list[CompletionItem]:
        from click.shell_completion import CompletionItem

        done, _, last = incomplete.rpartition(",")
        prefix = f"{done}," if done else ""
        taken = set(done.lower().split(","))
        return [
            CompletionItem(prefix + c)
            for c in self.choices
            if c.startswith(last.lower()) and c not in taken
        ]


class IntList(click.ParamType):  # type: ignore[type-arg]
    """A comma-separated list of integers (`16,32,64`) as a tuple; the options object the
    list goes into checks the values (`IntRange`)."""

    name = "integers"

    def __init__(self, example: str) -> None:
        self.example = example

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, tuple):
            return value
        try:
            return tuple(int(x) for x in str(value).replace(" ", "").split(","))
        except ValueError:
            self.fail(
                f"{value!r} is not a comma-separated list of integers, e.g. {self.example}",
                param,
                ctx,
            )


class IntRange(click.IntRange):
    """An integer, its range shown in --help. A value outside the range is passed on for
    the options object it goes into to refuse, as `Choice` does: one check, one wording."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return click.INT.convert(value, param, ctx)


class FloatRange(click.FloatRange):
    """A number, its range shown in --help; the options object checks it (`IntRange`)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return click.FLOAT.convert(value, param, ctx)


# Paths stay strings: "-" is stdin or stdout, and a trailing "/" must reach the checks.
class PathType(click.Path):
    """A path as vppctl takes one: a name no file can have (a NUL, a surrogate the file
    system's encoding cannot hold) is refused as the library refuses it
    (`vppctl.validate.file_name`, exit 3), before click looks the path up."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str):
            validate.file_name(value, param.human_readable_name if param else "a path")
        return super().convert(value, param, ctx)


PATH = PathType(path_type=str, allow_dash=True)
DEGREE = IntRange(1, MAX_DEGREE)
MICRO_BATCHES = IntRange(1, MAX_MICRO_BATCHES)
BATCH_DIM = IntRange(1, MAX_BATCH_DIM)

PLACEMENT_HELP = "loop: segment k on stage k % pp; v: stages 0..pp-1 then pp-1..0 (ZB-V)."
SPLIT_HELP = (
    "uniform: equal layer counts (must divide); keep: each stage keeps its layer count; "
    "balanced: minimise the busiest stage's load; explicit: the counts of --layers-per-chunk."
)


def _apply(f: F, decorators: Sequence[Callable[[F], F]]) -> F:
    for decorate in reversed(decorators):  # the first decorator's option is listed first
        f = decorate(f)
    return f


def program_argument(name: str) -> Callable[[F], F]:
    # Existence is checked by the loader, so a missing file is exit 3, not a usage error.
    return click.argument(name, type=PATH)


def output_option(help_text: str, required: bool = False) -> Callable[[F], F]:
    return click.option(
        "-o", "--output", type=PATH, required=required, metavar="OUT", help=help_text
    )


def json_option(f: F) -> F:
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        help="Print one JSON object on stdout instead of the table.",
    )(f)


def quiet_option(f: F) -> F:
    """`-q` means the same on every command: nothing on stderr but errors (no progress,
    warnings or `wrote` lines); results still go to stdout."""
    return click.option(
        "-q",
        "--quiet",
        is_flag=True,
        help="Nothing on stderr but errors: no progress, warnings or `wrote` lines.",
    )(f)


def seg_method_option(f: F) -> F:
    return click.option(
        "--seg-method",
        metavar="REGEX",
        help="Regex naming the repeated layer in the ops' struct names "
        "(Paddle's vpp_seg_method), e.g. DecoderLayer. Default: detected.",
    )(f)


def pp_option(help_text: str = "Expected number of stages.") -> Callable[[F], F]:
    return click.option("--pp", type=DEGREE, help=help_text)


def plan_options(command: Literal["convert", "simulate"]) -> Callable[[F], F]:
    """`--pp`, `--vpp`, `--placement`, `--split`, `--layers-per-chunk`, `--layout`, `--cost`
    and `--seg-method`, as `command` takes them: convert needs `--vpp` (or `--layout`) and
    defaults to loop placement and the params cost; simulate defaults to what the program
    records."""
    converting = command == "convert"
    recorded = "" if converting else " Default: the recorded plan's, else"
    decorators: list[Callable[[F], F]] = [
        pp_option(
            "Expected number of stages; derived from the program."
            if converting
            else "Stages (default: the program's)."
        ),
        click.option(
            "--vpp",
            type=DEGREE,
            help="Chunks (virtual stages) per stage"
            + (
                " (required, unless --layout gives them)."
                if converting
                else ". Default: a converted program's recorded plan, or --layout's."
            ),
        ),
        seg_method_option,
        click.option(
            "--placement",
            type=choice(PLACEMENTS),
            default="loop" if converting else None,
            show_default=converting,
            help=PLACEMENT_HELP + (f"{recorded} loop." if recorded else ""),
        ),
        click.option(
            "--split",
            type=choice(SPLITS),
            help=SPLIT_HELP
            + (
                " Default: uniform."
                if converting
                else f"{recorded} uniform when the layers divide, else balanced (with a warning)."
            ),
        ),
        click.option(
            "--layers-per-chunk",
            metavar="N,N,...",
            type=IntList("3,4,4,5"),
            default=(),
            help="Explicit layer counts per segment, in virtual-stage order (implies --split "
            "explicit).",
        ),
        layout_option,
        click.option(
            "--cost",
            type=choice(COST_KINDS),
            default="params" if converting else None,
            show_default=converting,
            help="Cost measure for --split balanced"
            + (" and the table." if converting else " (default params, as convert)."),
        ),
    ]
    return lambda f: _apply(f, decorators)


def layout_option(f: F) -> F:
    return click.option(
        "--layout",
        metavar="LAYOUT",
        help="The split as Megatron-Core's --pipeline-model-parallel-layout, e.g. "
        "'Et*3|(t*4|)*2t*3L' (E embedding, t a layer, L loss, | between virtual stages in "
        "order; vpp = stages / pp): an explicit split, loop-placed.",
    )(f)


def measured_options(*, step: bool = False) -> Callable[[F], F]:
    """`--costs-from FILE` and `--fill`, and with `step` simulate's `--measured-step`:
    measured costs in seconds instead of the program's estimate."""
    decorators: list[Callable[[F], F]] = [
        click.option(
            "--costs-from",
            type=PATH,
            metavar="FILE",
            help="Measured costs, in seconds, instead of the estimate: a costs CSV or JSON "
            "(per stage or per layer: forward_s, backward_s[, weight_s][, activation_bytes]), "
            "a torch profiler trace (its PP:<stage><F|B|I|W><mb> events) or a Paddle profiler "
            "trace of the program's own run. Times are then seconds everywhere.",
        ),
        click.option(
            "--fill",
            type=choice(FILLS),
            default="none",
            show_default=True,
            help="What --costs-from does not measure: none refuses it, estimate takes it from "
            "the program's estimate scaled to the measured ones (the report names them).",
        ),
    ]
    if step:
        decorators.append(
            click.option(
                "--measured-step",
                type=FloatRange(0),
                metavar="SECONDS",
                help="The step time measured, to print the prediction's error against "
                "(with --costs-from; a torch trace's profiler steps give one too).",
            )
        )
    return lambda f: _apply(f, decorators)


def p2p_options(f: F) -> F:
    """`--p2p-cost` and `--link`: what a hop between stages costs, given or timed."""
    return _apply(
        f,
        [
            click.option(
                "--p2p-cost",
                type=FloatRange(0),
                help="Time per point-to-point hop between stages, in the costs' unit: the "
                "mean stage's forward of one micro-batch (without a program, a chunk's "
                "forward), or seconds with --costs-from; 0 leaves hops out. Default: with a "
                "program, what its boundary activations take over --link (in seconds with "
                "--costs-from: bytes / bandwidth + latency); without one, 0.",
            ),
            click.option(
                "--link",
                type=choice(LINKS),
                help="The device and link a hop is timed on (vendor peak figures, "
                "docs/plan.md): " + ", ".join(LINKS) + ". Default: h100-ib.",
            ),
        ],
    )


PROGRAMS_RUNTIME = (
    "the program's own (paddle for a legacy program, paddle-pir for a PIR program), any "
    "without a program"
)


def runtime_option(what: str, default: str = PROGRAMS_RUNTIME) -> Callable[[F], F]:
    """`--runtime`: whose schedules and rules `what` uses."""
    return click.option(
        "--runtime",
        type=choice(RUNTIMES),
        help=f"Whose schedules and rules {what}: paddle (3.0.0, legacy programs), paddle-pir "
        "(3.3.1), megatron (Core 0.16.1), torch (2.13) or any (each schedule under its own "
        f"runtime's rules). Default: {default}.",
    )


def memory_options(f: F) -> F:
    """`--micro-batch-size`, `--seq-len` and `--memory-limit`: how to size a program's
    unknown dimensions, and the limit to check."""
    return _apply(
        f,
        [
            click.option(
                "--micro-batch-size",
                type=BATCH_DIM,
                help="Size of an activation's first unknown (-1) dimension. Default 1.",
            ),
            click.option(
                "--seq-len",
                type=BATCH_DIM,
                help="Size of an activation's later unknown (-1) dimensions. Default: counted "
                "as 1 (with a warning when there are any).",
            ),
            click.option(
                "--memory-limit",
                metavar="SIZE",
                callback=_parse_size,
                help="Bytes per stage, e.g. 80GiB or 80GB: stages whose peak exceeds it are "
                "flagged.",
            ),
        ],
    )


def _parse_size(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    size = vppctl.planner.parse_size(value)
    if size is None or size <= 0:
        raise click.BadParameter(
            f"{value!r} is not a size: give bytes with a unit, e.g. 80GiB, 80GB, 512MiB"
        )
    return size
