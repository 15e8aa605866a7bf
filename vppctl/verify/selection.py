"""Selection: which rules `verify` enforces (`--select`, `--ignore`), as ruff selects its.

A selector is a rule id (`V009`), a prefix of rule ids (`V00`: V001 to V009; `V`: every
rule) or `ALL`. A rule is enforced when `select` (default: every rule) matches it and
`ignore` does not, and where both match, the more specific (longer) selector wins, a tie
going to `ignore`: `select V0, ignore V009` enforces V001 to V008; `select V009, ignore
V0` enforces V009 alone. Every check still runs: the violations of a rule not enforced
are kept apart (`VerifyReport.ignored`), counted in every format, and do not fail the
program.
"""

from __future__ import annotations

from collections.abc import Sequence

from vppctl.verify.rules import RULES

ALL = "ALL"


def selectors(value: object) -> tuple[str, ...] | None:
    """`value` as selectors, upper case, in order, without repeats: a comma list (`"V009,
    V011"`) or a sequence of strings; None when it is neither, or one selects no rule."""
    if isinstance(value, str):
        items: Sequence[object] = value.split(",")
    elif isinstance(value, (list, tuple)):
        items = value
    else:
        return None
    found: list[str] = []
    for item in items:
        if not isinstance(item, str):
            return None
        code = item.strip().upper()
        if not code and isinstance(value, str):
            continue  # `V009,` or `,`: an empty item of a comma list
        if not _matches_any(code):
            return None
        found.append(code)
    return tuple(dict.fromkeys(found))


def unknown_selectors(value: object) -> list[str]:
    """The items of `value` that select no rule (for the message)."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        return []
    return [repr(i) for i in items if not (isinstance(i, str) and _matches_any(i.strip().upper()))]


def _matches_any(code: str) -> bool:
    return code == ALL or any(rule.startswith(code) for rule in RULES) if code else False


def _specificity(code: str, rule: str) -> int:
    """How specifically `code` names `rule` (its length; ALL: 0), or -1: not at all."""
    if code == ALL:
        return 0
    return len(code) if rule.startswith(code) else -1


def enforced(select: Sequence[str] | None, ignore: Sequence[str]) -> tuple[str, ...]:
    """The rules enforced under `select` (None: every rule) and `ignore`, in rule order."""
    chosen = []
    for rule in RULES:
        by_select = (
            0 if select is None else max((_specificity(c, rule) for c in select), default=-1)
        )
        by_ignore = max((_specificity(c, rule) for c in ignore), default=-1)
        if by_select >= 0 and by_select > by_ignore:
            chosen.append(rule)
    return tuple(chosen)
