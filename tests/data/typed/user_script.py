"""A training script's use of vppctl: every public call, type-checked with `mypy --strict`
against the installed package (tests/contract/test_typed.py) and run.

It makes a small program, converts it, checks it, and plans and simulates it, in the
directory given.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import vppctl


def main(work: Path) -> int:
    prog, out = work / "prog.pb", work / "prog.vpp.pb"
    sample = vppctl.SampleOptions(layers=4, pp=2, hidden=64, vocab=1000)
    made: vppctl.SampleOutcome = vppctl.sample_file(prog, sample)
    summary: vppctl.Summary = vppctl.inspect_file(prog, vppctl.InspectOptions())

    plan = vppctl.PlanOptions(vpp=2, split="balanced", cost="flops")
    converted: vppctl.ConvertOutcome = vppctl.convert_file(
        prog, out, vppctl.ConvertOptions(plan=plan, micro_batches=4)
    )
    segments: tuple[vppctl.Segment, ...] = converted.result.plan.segments
    bubble: vppctl.Bubble | None = converted.bubble

    report: vppctl.VerifyReport = vppctl.verify_file(out, vppctl.VerifyOptions(vpp=2))
    violations: tuple[vppctl.Violation, ...] = report.violations
    dumped: vppctl.DumpOutcome = vppctl.dump_file(out, work / "prog.pbtxt", vppctl.DumpOptions())

    memory = vppctl.MemoryOptions(micro_batch_size=2, seq_len=128)
    simulated: vppctl.SimulateOutcome = vppctl.simulate_run(
        out, vppctl.Pictures(svg=work / "t.svg"), vppctl.SimulateOptions(4, memory=memory)
    )
    picture: vppctl.SimulatedPlan | None = simulated.plan

    search = vppctl.PlanSearchOptions(
        micro_batches=[4, 8], schedules=["1f1b", "interleaved"], runtime="megatron"
    )
    try:
        planned: vppctl.PlanOutcome = vppctl.plan_run(prog, search)
    except vppctl.NoConversionFits as e:
        planned = e.outcome

    program: vppctl.Program = vppctl.read_program(prog)
    again: vppctl.Program = vppctl.parse_program(prog.read_bytes())
    result: vppctl.ConvertResult = vppctl.convert_program(
        program, vppctl.ConvertOptions(plan=vppctl.PlanOptions(vpp=2))
    )
    checked: vppctl.VerifyReport = vppctl.verify_program(program)
    written, warnings = vppctl.write_program(program, work / "again.vpp.pb")
    recorded: vppctl.Plan = result.plan

    try:
        vppctl.verify_file(work / "missing.pb")
    except vppctl.ProgramFileError as e:
        assert e.exit_code == 3
    errors: tuple[type[vppctl.VppctlError], ...] = (
        vppctl.UsageError,
        vppctl.ConversionError,
        vppctl.SelfCheckError,
        vppctl.SimulationError,
        vppctl.DeadlockError,
    )

    shapes = [
        made.to_json(),
        summary.to_json(),
        converted.to_json(),
        report.to_json(),
        dumped.to_json(),
        simulated.to_json(),
        planned.to_json(),
    ]
    print(json.dumps([shape["schema"] for shape in shapes]))
    print(len(segments), bubble is not None, len(violations), picture is not None)
    print(again.source, checked.valid, written > 0, len(warnings), recorded.vpp, len(errors))
    print(vppctl.__version__, sorted(vppctl.RULES)[0])
    return 0 if report.valid and checked.valid else 1


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
