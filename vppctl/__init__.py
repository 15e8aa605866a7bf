"""vppctl: convert pipeline-parallel training programs to virtual pipeline parallelism.

The Python API is one call per command, each of one shape: inputs, then the output,
then one options object named for the command; each returns one outcome whose
`to_json()` is the command's `--json`:

    import vppctl

    opts = vppctl.ConvertOptions(plan=vppctl.PlanOptions(vpp=2))
    outcome = vppctl.convert_file("prog.pb", "prog.vpp.pb", opts)
    outcome.result.plan.segments      # what went where
    vppctl.verify_file("prog.vpp.pb").valid

Lower down, `read_program` / `write_program` load and save a `Program` and
`convert_program` (in place) / `verify_program` work on one in memory. Options are
checked when they are made; every error is a `VppctlError` subclass carrying the
CLI's exit code, all exported here. Names are imported on first use, so
`import vppctl` stays cheap. docs/api.md is the reference, made from these docstrings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vppctl._lazy import face
from vppctl._version import __version__

# name -> the module (or package) that defines it
_API = {
    # one call per command
    "convert_file": "commands",
    "verify_file": "commands",
    "inspect_file": "commands",
    "dump_file": "commands",
    "sample_file": "commands",
    "simulate_run": "commands",
    "plan_run": "commands",
    # their options
    "ConvertOptions": "convert",
    "PlanOptions": "plan",
    "VerifyOptions": "verify",
    "InspectOptions": "summary",
    "DumpOptions": "commands",
    "SampleOptions": "sample",
    "SimulateOptions": "planner",
    "Pictures": "commands",
    "PlanSearchOptions": "planner",
    "MemoryOptions": "planner",
    # their outcomes
    "ConvertOutcome": "outcomes",
    "Bubble": "outcomes",
    "VerifyReport": "verify",
    "Violation": "verify",
    "Summary": "summary",
    "DumpOutcome": "outcomes",
    "SampleOutcome": "outcomes",
    "SimulateOutcome": "outcomes",
    "SimulatedPlan": "outcomes",
    "PlanOutcome": "outcomes",
    # programs in memory
    "Program": "program",
    "read_program": "program",
    "parse_program": "program",
    "write_program": "program",
    "convert_program": "convert",
    "ConvertResult": "convert",
    "verify_program": "verify",
    "Plan": "plan",
    "Segment": "plan",
    "PirPlan": "plan",
    "RULES": "verify",
    # errors: every one a call above can raise
    "VppctlError": "errors",
    "UsageError": "errors",
    "ProgramFileError": "errors",
    "ConversionError": "errors",
    "SelfCheckError": "errors",
    "OutOfMemoryError": "errors",
    "SimulationError": "schedule",
    "DeadlockError": "schedule",
    "ScheduleRefused": "schedule",
    "LayoutError": "plan",
    "NoConversionFits": "outcomes",
}

# A list a type checker reads (it cannot read one built from _API);
# tests/contract/test_api.py checks that the two name the same.
__all__ = [
    "RULES",
    "Bubble",
    "ConversionError",
    "ConvertOptions",
    "ConvertOutcome",
    "ConvertResult",
    "DeadlockError",
    "DumpOptions",
    "DumpOutcome",
    "InspectOptions",
    "LayoutError",
    "MemoryOptions",
    "NoConversionFits",
    "OutOfMemoryError",
    "Pictures",
    "PirPlan",
    "Plan",
    "PlanOptions",
    "PlanOutcome",
    "PlanSearchOptions",
    "Program",
    "ProgramFileError",
    "SampleOptions",
    "SampleOutcome",
    "ScheduleRefused",
    "Segment",
    "SelfCheckError",
    "SimulateOptions",
    "SimulateOutcome",
    "SimulatedPlan",
    "SimulationError",
    "Summary",
    "UsageError",
    "VerifyOptions",
    "VerifyReport",
    "Violation",
    "VppctlError",
    "__version__",
    "convert_file",
    "convert_program",
    "dump_file",
    "inspect_file",
    "parse_program",
    "plan_run",
    "read_program",
    "sample_file",
    "simulate_run",
    "verify_file",
    "verify_program",
    "write_program",
]

if TYPE_CHECKING:  # the names, re-exported, for type checkers (`X`: PEP 484)
    from vppctl.commands import (
        DumpOptions,
        Pictures,
        convert_file,
        dump_file,
        inspect_file,
        plan_run,
        sample_file,
        simulate_run,
        verify_file,
    )
    from vppctl.convert import (
        ConvertOptions,
        ConvertResult,
        convert_program,
    )
    from vppctl.errors import (
        ConversionError,
        OutOfMemoryError,
        ProgramFileError,
        SelfCheckError,
        UsageError,
        VppctlError,
    )
    from vppctl.outcomes import (
        Bubble,
        ConvertOutcome,
        DumpOutcome,
        NoConversionFits,
        PlanOutcome,
        SampleOutcome,
        SimulatedPlan,
        SimulateOutcome,
    )
    from vppctl.plan import LayoutError, PirPlan, Plan, PlanOptions, Segment
    from vppctl.planner import (
        MemoryOptions,
        PlanSearchOptions,
        SimulateOptions,
    )
    from vppctl.program import (
        Program,
        parse_program,
        read_program,
        write_program,
    )
    from vppctl.sample import SampleOptions
    from vppctl.schedule import DeadlockError, ScheduleRefused, SimulationError
    from vppctl.summary import InspectOptions, Summary
    from vppctl.verify import (
        RULES,
        VerifyOptions,
        VerifyReport,
        Violation,
        verify_program,
    )


__getattr__, __dir__ = face(__name__, _API, globals())
