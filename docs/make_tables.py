"""Write the tables of the docs that the code already holds, between their markers:
the verify rules (docs/verify.md), how the rules apply to a PIR program
(docs/paddle.md), the exit codes of each command (docs/ci.md), and each runtime's
rules and the link presets (docs/plan.md).

    python docs/make_tables.py            # rewrite the tables in place
    python docs/make_tables.py --check    # exit 1 if a table is not what this writes

tests/contract/test_docs.py runs the check, so a rule or an exit code cannot change without
its table. Everything else in those pages is prose, kept true by the docs test.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def rules_table() -> str:
    from vppctl.verify import RULES

    rows = [f"| {rule} | {_cell(text)} |" for rule, text in RULES.items()]
    return "\n".join(["| rule | checks |", "| --- | --- |", *rows])


def pir_rules_table() -> str:
    from vppctl.verify import PIR_RULES

    rows = [f"| {rule} | {_cell(text)} |" for rule, text in PIR_RULES.items()]
    return "\n".join(["| rule | on a PIR program |", "| --- | --- |", *rows])


def runtime_rules_table() -> str:
    from vppctl.schedule import RULES, RUNTIME_NAMES

    rows = []
    for r in RULES:
        words = f'"{_cell(r.words)}"' if r.words else "(none)"
        kind = "refused" if r.refuses else "noted"
        if r.breaks is None:
            kind = "any m" if r.id not in ("P1", "R1", "M0", "T9", "P8") else "refused"
        if r.id == "P8":
            kind = "refused (the simulator finds the cycle)"
        if r.split:
            kind = "refused (checked on the split)"
        if r.needs_plan:
            kind = "needs `vppctl.paddle.pir_plan` (checked on the split; `plan` says how)"
        where = RUNTIME_NAMES[r.runtime]
        rows.append(f"| {r.id} | {where} | {_cell(r.says)} | `{r.source}` | {words} | {kind} |")
    head = "| rule | runtime | says | source (file, function) | the runtime's words | vppctl |"
    return "\n".join([head, "| --- | --- | --- | --- | --- | --- |", *rows])


def links_table() -> str:
    from vppctl.planner import DEFAULT_LINK, LINKS

    rows = [
        f"| `{p.name}`{' (default)' if p.name == DEFAULT_LINK else ''} | {p.device} | "
        f"{p.flops / 1e12:g} | {p.link} | {p.bandwidth / 1e9:g} | {p.latency * 1e6:g} |"
        for p in LINKS.values()
    ]
    head = "| `--link` | device | TFLOP/s (dense BF16) | link | GB/s per direction | us per hop |"
    return "\n".join([head, "| --- | --- | --- | --- | --- | --- |", *rows])


def command_exit_codes(command: str) -> list[int]:
    """The exit codes a command's --help lists (its epilog, the one source of both)."""
    from vppctl.cli import cli

    epilog = cli.commands[command].epilog or ""
    listed = epilog.split("Exit codes: ", 1)[1]
    return [int(code) for code in re.findall(r"(?:^|, )(\d+) ", listed)]


def exit_codes_table() -> str:
    from vppctl.cli import cli

    rows = [
        f"| `{name}` | {', '.join(map(str, command_exit_codes(name)))} |" for name in cli.commands
    ]
    return "\n".join(["| command | exit codes |", "| --- | --- |", *rows])


# (page, marker, what goes between `<!-- marker:begin -->` and `<!-- marker:end -->`)
TABLES: tuple[tuple[str, str, Callable[[], str]], ...] = (
    ("verify.md", "rules", rules_table),
    ("paddle.md", "pir-rules", pir_rules_table),
    ("ci.md", "exit-codes", exit_codes_table),
    ("plan.md", "runtime-rules", runtime_rules_table),
    ("plan.md", "links", links_table),
)


def rendered(text: str, marker: str, table: str) -> str:
    """`text` with the table between the marker's comments replaced by `table`."""
    begin, end = f"<!-- {marker}:begin -->\n", f"<!-- {marker}:end -->"
    head, found, rest = text.partition(begin)
    if not found or end not in rest:
        raise SystemExit(f"the markers {begin.strip()} ... {end} are missing")
    return head + begin + table + "\n" + end + rest.split(end, 1)[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a table is stale")
    args = parser.parse_args(argv)
    stale = []
    for page, marker, make in TABLES:
        path = DOCS / page
        text = path.read_text()
        new = rendered(text, marker, make())
        if new != text:
            stale.append(f"docs/{page} ({marker})")
            if not args.check:
                path.write_text(new)
    if args.check and stale:
        print(f"stale: {', '.join(stale)}; run python docs/make_tables.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
