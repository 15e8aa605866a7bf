"""Write docs/api.md, the Python API reference, from the code: every name in
`vppctl.__all__`, its signature, its docstring, and for the options and outcomes each
field with its type, default, command-line flag and the comment beside it.

    python docs/make_api.py            # rewrite docs/api.md
    python docs/make_api.py --check    # exit 1 if docs/api.md is not what this writes

tests/contract/test_api_reference.py runs the check in CI, so the reference cannot drift from
the docstrings. Nothing here but the standard library (inspect, ast): no dependency.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
OUT = DOCS / "api.md"

# The reference's sections, in order, and the names each documents. Every name of
# `vppctl.__all__` must be in exactly one (`render` refuses otherwise).
SECTIONS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "Calls",
        "One call per command, each of one shape: its inputs, then its output (None where "
        "it has a default), then one options object named for the command, then the "
        "keyword `progress` (a `vppctl.progress.Observer` told each phase of long work; "
        "nothing is printed). Each returns one outcome whose `to_json()` is what the "
        "command's `--json` prints.",
        (
            "convert_file",
            "verify_file",
            "inspect_file",
            "dump_file",
            "sample_file",
            "simulate_run",
            "plan_run",
        ),
    ),
    (
        "Options",
        "Each options object checks its fields when it is made and raises `UsageError` "
        "(exit code 2) naming the field as the command line and the API spell it, the "
        "value and the legal values. The same concept is the same object in every call: "
        "`PlanOptions` in `ConvertOptions` and `SimulateOptions`, `MemoryOptions` in "
        "`SimulateOptions` and `PlanSearchOptions`.",
        (
            "ConvertOptions",
            "PlanOptions",
            "VerifyOptions",
            "InspectOptions",
            "DumpOptions",
            "SampleOptions",
            "SimulateOptions",
            "Pictures",
            "PlanSearchOptions",
            "MemoryOptions",
        ),
    ),
    (
        "Outcomes",
        "Frozen dataclasses of plain values. `to_json()` returns exactly the object the "
        "command's `--json` prints (JSON Schemas in `vppctl/report/schemas/`).",
        (
            "ConvertOutcome",
            "Bubble",
            "ConvertResult",
            "Plan",
            "Segment",
            "PirPlan",
            "VerifyReport",
            "Violation",
            "RULES",
            "Summary",
            "DumpOutcome",
            "SampleOutcome",
            "SimulateOutcome",
            "SimulatedPlan",
            "PlanOutcome",
        ),
    ),
    (
        "Programs in memory",
        "A `Program` is the loaded protobuf and its side tables; `convert_program` changes "
        "it in place.",
        (
            "Program",
            "read_program",
            "parse_program",
            "write_program",
            "convert_program",
            "verify_program",
        ),
    ),
    (
        "Errors",
        "Every error a call raises is a `VppctlError` carrying the exit code the command "
        "line would use (`e.exit_code`), the token its JSON names (`e.kind`) and maybe "
        "a `hint`. An error worded in the command line's flags (`use --split balanced`) "
        "carries a note naming the API's fields (`--split is ConvertOptions.plan.split`), "
        "shown under the traceback (`e.__notes__`).",
        (
            "VppctlError",
            "UsageError",
            "ProgramFileError",
            "ConversionError",
            "SelfCheckError",
            "OutOfMemoryError",
            "SimulationError",
            "DeadlockError",
            "ScheduleRefused",
            "LayoutError",
            "NoConversionFits",
        ),
    ),
)


def render() -> str:
    """The reference, as docs/api.md holds it."""
    import vppctl

    listed = [name for _, _, names in SECTIONS for name in names]
    missing = sorted(set(vppctl.__all__) - {"__version__", *listed})
    extra = sorted(set(listed) - set(vppctl.__all__))
    if missing or extra or len(listed) != len(set(listed)):
        raise SystemExit(f"docs/make_api.py: SECTIONS misses {missing}, has extra {extra}")
    lines = [
        "# The Python API",
        "",
        "<!-- Written by docs/make_api.py from the docstrings; do not edit. -->",
        "",
        _doc(vppctl),
        "",
        "Names: " + ", ".join(f"[`{n}`](#{_anchor(n)})" for n in listed) + ".",
    ]
    for title, intro, names in SECTIONS:
        lines += ["", f"## {title}", "", intro]
        for name in names:
            lines += ["", *_entry(name, getattr(vppctl, name))]
    return "\n".join(lines).rstrip() + "\n"


def _anchor(name: str) -> str:
    return name.lower()


def _doc(obj: object) -> str:
    doc = inspect.cleandoc(obj.__doc__ or "").strip()
    name = getattr(obj, "__name__", "")
    if not doc or (inspect.isclass(obj) and doc.startswith(f"{name}(")):  # dataclass's own
        raise SystemExit(f"docs/make_api.py: {name or obj!r} has no docstring to document")
    return doc


def _entry(name: str, obj: Any) -> list[str]:
    if inspect.isclass(obj) and issubclass(obj, BaseException):
        return _error(name, obj)
    if inspect.isclass(obj):
        return _class(name, obj)
    if callable(obj):
        return [f"### {name}", "", "```python", _signature(name, obj), "```", "", _doc(obj)]
    listed = ", ".join(f"`{key}`" for key in obj)
    return [f"### {name}", "", f"A `{type(obj).__name__}` of {len(obj)} entries: {listed}."]


def _signature(name: str, func: Callable[..., Any], *, returns: bool = True) -> str:
    """`name(a: T, *, b: U = 1) -> R` as the source writes it (the annotations are
    strings: every module has `from __future__ import annotations`), one parameter a
    line when it is long."""
    sig = inspect.signature(func)
    factories = _factories(func)
    params, star = [], False
    for p in sig.parameters.values():
        if p.name == "self":
            continue
        if p.kind is p.KEYWORD_ONLY and not star:
            params.append("*")
            star = True
        text = p.name if p.annotation is p.empty else f"{p.name}: {p.annotation}"
        if p.name in factories:
            text += f" = {factories[p.name]}"
        elif p.default is not p.empty:
            text += f" = {p.default!r}"
        params.append(text)
    ret = ""
    if returns and sig.return_annotation is not sig.empty:
        ret = f" -> {sig.return_annotation}"
    text = f"{name}({', '.join(params)}){ret}"
    if len(text) <= 88:
        return text
    return f"{name}(\n" + "".join(f"    {p},\n" for p in params) + f"){ret}"


def _factories(obj: object) -> dict[str, str]:
    """A dataclass's fields whose default is made by a factory: `PlanOptions()`."""
    if not (inspect.isclass(obj) and dataclasses.is_dataclass(obj)):
        return {}
    return {
        f.name: _default(f).strip("`")
        for f in dataclasses.fields(obj)
        if f.default_factory is not dataclasses.MISSING
    }


def _class(name: str, cls: type) -> list[str]:
    lines = [f"### {name}", ""]
    if dataclasses.is_dataclass(cls):
        lines += ["```python", _signature(name, cls, returns=False), "```", ""]
    lines.append(_doc(cls))
    if dataclasses.is_dataclass(cls):
        lines += _fields(cls)
    lines += _members(cls)
    return lines


def _fields(cls: type) -> list[str]:
    flags: dict[str, str] = getattr(cls, "FLAGS", {})
    comments = _field_comments(cls)
    with_flags = bool(flags) or hasattr(cls, "NESTED")
    head = "| field | type | default | flag | |" if with_flags else "| field | type | default | |"
    rule = "| --- | --- | --- | --- | --- |" if with_flags else "| --- | --- | --- | --- |"
    rows = ["", head, rule]
    for f in dataclasses.fields(cls):
        cells = [f"`{f.name}`", f"`{f.type}`", _default(f)]
        if with_flags:
            cells.append(f"`{flags[f.name]}`" if f.name in flags else "")
        said = [comments.get(f.name, ""), _legal(str(f.type))]
        cells.append("; ".join(x for x in said if x))
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return rows


def _legal(annotation: str) -> str:
    """`one of loop, v` for a field typed with a choice of `vppctl.choices`."""
    import typing

    from vppctl import choices

    for word in annotation.replace("[", " ").replace("]", " ").replace("|", " ").split():
        kind = getattr(choices, word, None)
        if typing.get_origin(kind) is typing.Literal:
            return "one of " + ", ".join(typing.get_args(kind))
    return ""


def _default(f: dataclasses.Field[Any]) -> str:
    if f.default is not dataclasses.MISSING:
        return f"`{f.default!r}`"
    if f.default_factory is not dataclasses.MISSING:
        return f"`{getattr(f.default_factory, '__name__', 'factory')}()`"
    return "required"


def _field_comments(cls: type) -> dict[str, str]:
    """Each field's comment in the source: the one beside it, else the lines above it."""
    source = textwrap.dedent(inspect.getsource(cls))
    lines = source.splitlines()
    tree = ast.parse(source)
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    found = {}
    for node in body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            line = lines[node.lineno - 1]
            comment = _comment_of(line)
            above = []
            k = node.lineno - 2
            while k >= 0 and lines[k].strip().startswith("#"):
                above.insert(0, lines[k].strip().lstrip("#").strip())
                k -= 1
            found[node.target.id] = " ".join([*above, comment]).strip()
    return found


def _comment_of(line: str) -> str:
    """The comment at the end of a source line (a `#` outside a string)."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#":
            return line[i + 1 :].strip()
    return ""


def _members(cls: type) -> list[str]:
    """Public methods and properties defined on the class itself, with their docstrings."""
    out = []
    for name, member in vars(cls).items():
        if name.startswith("_") or name in ("FLAGS", "NESTED"):
            continue
        if isinstance(member, property) and member.fget is not None:
            ret = inspect.signature(member.fget).return_annotation
            doc = _doc_or_none(member.fget)
            said = f": {_one_line(doc)}" if doc else ""
            out += ["", f"- `{name}` (property) -> `{ret}`{said}"]
        elif inspect.isfunction(member) or isinstance(member, classmethod):
            func = member.__func__ if isinstance(member, classmethod) else member
            doc = _doc_or_none(func)
            said = f": {_one_line(doc)}" if doc else ""
            out += ["", f"- `{_signature(name, func)}`{said}"]
    return out


def _doc_or_none(func: Callable[..., Any]) -> str:
    """A method's docstring, or "" (a method's name and signature may say enough)."""
    return inspect.cleandoc(func.__doc__ or "").strip()


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _error(name: str, cls: type[BaseException]) -> list[str]:
    bases = ", ".join(b.__name__ for b in cls.__bases__)
    code = getattr(cls, "exit_code", None)
    lines = [f"### {name}", "", f"`{name}({bases})`, exit code {code}.", "", _doc(cls)]
    return lines + _members(cls)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/api.md is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if OUT.read_text() != text:
            print("docs/api.md is stale: run python docs/make_api.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main(sys.argv[1:]))
