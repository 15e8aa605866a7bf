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

import importlib
from typing import TYPE_CHECKING, Any

from vppctl._version import __version__

# name -> the module that defines it
_API = {
    # one call per command, and their outcomes
    "convert_file": "vppctl.commands",
    "verify_file": "vppctl.commands",
    "inspect_file": "vppctl.commands",
    "dump_file": "vppctl.commands",
    "sample_file": "vppctl.commands",
    "simulate_run": "vppctl.commands",
    "plan_run": "vppctl.commands",
    "ConvertOutcome": "vppctl.commands",
    "DumpOutcome": "vppctl.commands",
    "SampleOutcome": "vppctl.commands",
    "SimulateOutcome": "vppctl.commands",
    "PlanOutcome": "vppctl.commands",
    "Bubble": "vppctl.commands",
    "VerifyReport": "vppctl.verify.expectation",
    "Summary": "vppctl.summary",
    # options
    "ConvertOptions": "vppctl.convert",
    "PlanOptions": "vppctl.plan",
    "SampleOptions": "vppctl.sample",
    "MemoryOptions": "vppctl.planner.memory",
    # programs in memory
    "Program": "vppctl.program.load",
    "read_program": "vppctl.program.load",
    "parse_program": "vppctl.program.load",
    "write_program": "vppctl.program.save",
    "convert_program": "vppctl.convert",
    "ConvertResult": "vppctl.convert",
    "verify_program": "vppctl.verify.expectation",
    "Plan": "vppctl.plan",
    "Segment": "vppctl.plan",
    "Violation": "vppctl.verify.checks",
    "RULES": "vppctl.verify.checks",
    # errors
    "VppctlError": "vppctl.errors",
    "UsageError": "vppctl.errors",
    "ProgramFileError": "vppctl.errors",
    "ConversionError": "vppctl.errors",
    "SelfCheckError": "vppctl.errors",
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
    from vppctl.planner.memory import MemoryOptions
    from vppctl.program import Program, parse_program, read_program, write_program
    from vppctl.sample import SampleOptions
    from vppctl.summary import Summary
    from vppctl.verify.checks import RULES, Violation
    from vppctl.verify.expectation import VerifyReport, verify_program


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'vppctl' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
