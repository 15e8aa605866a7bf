"""vppctl: convert pipeline-parallel training programs to virtual pipeline parallelism.

The Python API is one call per command, each returning one outcome object:

    import vppctl

    opts = vppctl.ConvertOptions(plan=vppctl.PlanOptions(vpp=2))
    outcome = vppctl.convert_file("prog.pb", "prog.vpp.pb", opts)
    outcome.result.plan.segments      # what went where
    vppctl.verify_file("prog.vpp.pb").valid

Lower down, `read_program` / `write_program` load and save a `Program` and
`convert_program` / `verify_program` work on one in memory. Errors are
`VppctlError` subclasses carrying the CLI's exit code. Names are imported on
first use, so `import vppctl` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vppctl._lazy import face
from vppctl._version import __version__

# name -> the module (or package) that defines it
_API = {
    # one call per command, and their outcomes
    "convert_file": "commands",
    "verify_file": "commands",
    "inspect_file": "commands",
    "dump_file": "commands",
    "sample_file": "commands",
    "simulate_run": "commands",
    "plan_run": "commands",
    "ConvertOutcome": "commands",
    "DumpOutcome": "commands",
    "SampleOutcome": "commands",
    "SimulateOutcome": "commands",
    "PlanOutcome": "commands",
    "Bubble": "commands",
    "VerifyReport": "verify",
    "Summary": "summary",
    # options
    "ConvertOptions": "convert",
    "PlanOptions": "plan",
    "SampleOptions": "sample",
    "MemoryOptions": "planner",
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
    "Violation": "verify",
    "RULES": "verify",
    # errors
    "VppctlError": "errors",
    "UsageError": "errors",
    "ProgramFileError": "errors",
    "ConversionError": "errors",
    "SelfCheckError": "errors",
}

__all__ = ["__version__", *_API]

if TYPE_CHECKING:
    from vppctl.commands import (
        Bubble,
        ConvertOutcome,
        DumpOutcome,
        PlanOutcome,
        SampleOutcome,
        SimulateOutcome,
        convert_file,
        dump_file,
        inspect_file,
        plan_run,
        sample_file,
        simulate_run,
        verify_file,
    )
    from vppctl.convert import ConvertOptions, ConvertResult, convert_program
    from vppctl.errors import (
        ConversionError,
        ProgramFileError,
        SelfCheckError,
        UsageError,
        VppctlError,
    )
    from vppctl.plan import Plan, PlanOptions, Segment
    from vppctl.planner import MemoryOptions
    from vppctl.program import Program, parse_program, read_program, write_program
    from vppctl.sample import SampleOptions
    from vppctl.summary import Summary
    from vppctl.verify import RULES, VerifyReport, Violation, verify_program


__getattr__, __dir__ = face(__name__, _API, globals())
