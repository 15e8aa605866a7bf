"""`vppctl verify`'s report in each output format, its per-rule statistics and the rules.

Formats (`--output-format`, as ruff has them):

    full      the violations as a table (the default), or the one `valid:` line
    concise   one line per violation: `prog.pb:block0:op309: V008 transpose2_grad is on
              [1] chunk 1, its forward op #146 (transpose2) on [1] chunk 0`
    json      one JSON object (`VerifyReport.to_json()`; vppctl/report/schemas/verify.json)
    github    GitHub Actions workflow commands, one `::error` per violation
    junit     a JUnit XML report: one test case per rule, a failure listing its violations

Each also counts the violations of the rules not enforced (`--ignore`, `--select`):
a note line, a `::notice`, a skipped test case, `ignored` in JSON, rows marked
`(ignored)` in the statistics.

Every name from the program is escaped (`printed`, `printable`) in every format but
JSON, which escapes control characters itself; XML could not hold them at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from xml.etree import ElementTree

from rich.console import Console
from rich.table import Table

from vppctl.escape import github_data, github_property, printable
from vppctl.report.common import (
    TABLE_ROWS,
    compact_table,
    printed,
)
from vppctl.verify import (
    PIR_RULES,
    RULES,
    VerifyReport,
    Violation,
    ignored_statistics,
    statistics,
)

# Said whenever a program carries no plan: its vpp then comes from --vpp or its chunk
# ids, and its placement from --placement or loop, not from what convert decided.
NO_PLAN = "no pipeline plan recorded"

# Said of every PIR program `verify` checks (`vppctl verify --rules` lists how).
PIR_NOTE = f"read from PIR: {', '.join(PIR_RULES)} apply in part (vppctl verify --rules)"


def verify_line(report: VerifyReport) -> str:
    """The one line `verify` prints for a valid program."""
    layers = report.layers
    found = f"{len(layers)} layers ({layers.layer_class})" if layers else "no layers"
    line = (
        f"valid: pp {report.pp} x vpp {report.vpp}, {report.placement} placement, {found}; "
        f"cross-stage edges per micro-batch: {report.cross_stage_edges}"
    )
    if report.recorded is None:
        line += f"; {NO_PLAN}"
    if report.pir:
        line += f"; {PIR_NOTE}"
    if report.ignored:
        line += f"; {ignored_note(report)}"
    return line


def ignored_note(report: VerifyReport) -> str:
    """What the rules not enforced found (`ignored 12 violation(s) of rules not enforced:
    V009 12`), said in every format; "" when nothing was ignored."""
    if not report.ignored:
        return ""
    counts = ", ".join(f"{rule} {count}" for rule, count in ignored_statistics(report))
    return f"ignored {len(report.ignored)} violation(s) of rules not enforced: {counts}"


def no_plan_note(report: VerifyReport) -> str:
    checked = f"{NO_PLAN}: checked as pp {report.pp} x vpp {report.vpp}"
    if not report.pir:
        return (
            f"{checked} (vpp from --vpp or the chunk ids), {report.placement} placement; a "
            "program not yet converted needs `vppctl convert` first"
        )
    # vppctl converts no PIR program: Paddle's own PIR completion does (docs/paddle.md)
    if report.chunk_ids:
        return (
            f"{checked} (vpp from --vpp or the chunk ids Paddle's PIR completion wrote), "
            f"{report.placement} placement"
        )
    source = "vpp from --vpp; " if report.vpp > 1 else ""
    return (
        f"{checked} ({source}no op carries a chunk id past 0: each is checked as chunk 0), "
        f"{report.placement} placement; a program not yet converted needs Paddle's PIR "
        "completion (vpp_degree > 1) first, with the plan `vppctl convert` writes "
        "(vppctl.paddle.pir_plan) or its own split"
    )


def where(v: Violation) -> str:
    """`block0:op309`, `block0` or "" (a violation of the whole program)."""
    if v.block < 0:
        return ""
    return f"block{v.block}" + (f":op{v.op}" if v.op >= 0 else "")


def statement(v: Violation) -> str:
    """The violation for people: the op's type, then the message (`transpose2_grad is on
    ...`); the message alone when it is about no one op."""
    return f"{v.type} {v.message}" if v.op >= 0 and v.type else v.message


# -- full ------------------------------------------------------------------------


def violations_table(violations: Sequence[Violation], limit: int = TABLE_ROWS) -> Table:
    """The first `limit` violations (rendering is slow and unreadable past a few hundred)."""
    table = compact_table()
    table.add_column("Rule", no_wrap=True)
    table.add_column("Block", justify="right", no_wrap=True)
    table.add_column("Op", justify="right", no_wrap=True)
    table.add_column("Type", no_wrap=True)
    table.add_column("Message")
    for v in violations[:limit]:
        cells = (
            v.rule,
            str(v.block) if v.block >= 0 else "-",
            str(v.op) if v.op >= 0 else "-",
            v.type or "-",
            v.message,
        )
        table.add_row(*map(printed, cells))
    return table


def render_verify(console: Console, report: VerifyReport) -> None:
    if report.valid:
        console.print(printed(verify_line(report)), soft_wrap=True)
        return
    console.print(printed(f"{len(report.violations)} violation(s) in {report.source}"))
    console.print(violations_table(report.violations))
    hidden = len(report.violations) - TABLE_ROWS
    if hidden > 0:
        console.print(printed(f"... and {hidden} more violation(s); --json lists them all"))
    if report.recorded is None:
        console.print(printed(no_plan_note(report)), soft_wrap=True)
    if report.pir:
        console.print(printed(PIR_NOTE), soft_wrap=True)
    if report.ignored:
        console.print(printed(ignored_note(report)), soft_wrap=True)


# -- concise, github ---------------------------------------------------------------


def concise_lines(report: VerifyReport) -> list[str]:
    """One line per violation, `SOURCE:blockB:opN: RULE TYPE MESSAGE`, then a count (or
    the `valid:` line)."""
    if report.valid:
        return [verify_line(report)]
    lines = []
    for v in report.violations:
        place = ":".join(p for p in (report.source, where(v)) if p)
        lines.append(f"{place}: {v.rule} {statement(v)}")
    rules = len({v.rule for v in report.violations})
    lines.append(f"Found {len(report.violations)} violation(s) of {rules} rule(s)")
    if report.recorded is None:
        lines.append(no_plan_note(report))
    if report.pir:
        lines.append(PIR_NOTE)
    if report.ignored:
        lines.append(ignored_note(report))
    return [printable(line) for line in lines]


def github_lines(report: VerifyReport) -> list[str]:
    """GitHub Actions workflow commands: `::error file=SOURCE,title=RULE::WHERE: MESSAGE`,
    one per violation (an annotation on the run), and one `::notice` counting the
    violations of rules not enforced; nothing for a valid program with none."""
    lines = []
    source = github_property(printable(report.source))
    for v in report.violations:
        place = where(v)
        message = printable((f"{place}: " if place else "") + statement(v))
        lines.append(f"::error file={source},title={v.rule}::{github_data(message)}")
    if report.ignored:
        note = github_data(printable(ignored_note(report)))
        lines.append(f"::notice file={source},title=vppctl verify::{note}")
    return lines


# -- junit -------------------------------------------------------------------------


def junit_xml(report: VerifyReport) -> str:
    """A JUnit XML report as GitLab, Jenkins and other CI servers read one: one test suite
    for the program, one test case per rule (`V008`, named with its statement), and for
    each broken rule a failure whose text lists its violations, one concise line each.
    No times or host names, so the same program gives the same bytes."""
    source = printable(report.source)
    by_rule: dict[str, list[Violation]] = {}
    for v in report.violations:
        by_rule.setdefault(v.rule, []).append(v)
    ignored = dict(ignored_statistics(report))
    enforced = set(report.rules)
    skipped = str(len(RULES) - len(enforced))
    counts = {"tests": str(len(RULES)), "failures": str(len(by_rule)), "errors": "0"}
    suites = ElementTree.Element("testsuites", {"name": "vppctl verify", **counts})
    suite = ElementTree.SubElement(
        suites, "testsuite", {"name": f"vppctl verify {source}", **counts, "skipped": skipped}
    )
    for rule, text in RULES.items():
        case = ElementTree.SubElement(
            suite, "testcase", classname=f"vppctl.verify.{rule}", name=f"{rule} {text}"
        )
        if rule not in enforced:  # a rule not enforced is a skipped test, with its count
            found = ignored.get(rule, 0)
            ElementTree.SubElement(
                case, "skipped", message=f"not enforced (--select, --ignore); {found} violation(s)"
            )
            continue
        broken = by_rule.get(rule)
        if broken:
            failure = ElementTree.SubElement(
                case,
                "failure",
                type=rule,
                message=printable(f"{len(broken)} violation(s): {statement(broken[0])}"),
            )
            failure.text = "\n".join(
                printable(":".join(p for p in (source, where(v)) if p) + f": {statement(v)}")
                for v in broken
            )
    ElementTree.indent(suites)
    body = ElementTree.tostring(suites, encoding="unicode")
    return f'<?xml version="1.0" encoding="UTF-8"?>\n{body}\n'


# -- statistics ----------------------------------------------------------------------


def statistics_table(report: VerifyReport) -> Table:
    table = compact_table()
    table.add_column("Count", justify="right", no_wrap=True)
    table.add_column("Rule", no_wrap=True)
    table.add_column("Checks")
    for rule, count in statistics(report):
        table.add_row(printed(str(count)), printed(rule), printed(RULES[rule]))
    for rule, count in ignored_statistics(report):
        table.add_row(printed(str(count)), printed(rule), printed(f"(ignored) {RULES[rule]}"))
    return table


# -- the rules -----------------------------------------------------------------------


def rules_table() -> Table:
    table = compact_table()
    table.add_column("Rule", no_wrap=True)
    table.add_column("Checks")
    for rule, text in RULES.items():
        table.add_row(printed(rule), printed(text))
    return table


def pir_rules_table() -> Table:
    """How the rules apply in part to a program read from PIR (the others as stated)."""
    table = compact_table("on a PIR program (Paddle 3.x); the other rules apply as stated")
    table.add_column("Rule", no_wrap=True)
    table.add_column("Checks")
    for rule, text in PIR_RULES.items():
        table.add_row(printed(rule), printed(text))
    return table
