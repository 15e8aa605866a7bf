"""Lazy faces: a package's public names, each imported from its module on first use.

This is vppctl's one way to load lazily. A package whose modules some command does not
need (the simulator, the planner, the sample generator, the renderers, the PIR reader,
the whole API) hands its names to `face` instead of importing them. Code that needs such a
name only when it runs imports the package at its top (`from vppctl import planner`)
and reaches the name where it calls it (`planner.simulate_program(...)`): importing the
package loads only its face, so `vppctl --help` and a plain `convert` load nothing they
do not use (tests/test_lazy_imports.py pins both). vppctl never imports inside a
function: ruff's PLC0415 keeps it so, and its TID253 list in pyproject.toml names the
only exceptions, third-party modules costly or not always there (rich, Paddle). A
package whose every user needs all of it (engine, program, verify) keeps a plain face,
and so does cli, whose import registers the commands. Type checkers read the names
from each face's `if TYPE_CHECKING:` imports.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def face(
    package: str, names: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """(`__getattr__`, `__dir__`) for `package`: `names` maps each public name to the module
    (relative to `package`) that defines it. A name is read from its module at each use,
    never copied into the package, so that whoever replaces it there (a test's
    monkeypatch) is seen by every caller that reaches it through the face.

    No name may be a module's: importing a submodule sets the package's attribute of that
    name to the module, and the face would then hand out the module instead."""
    clash = set(names) & set(names.values())
    if clash:
        raise ValueError(f"{package}: {', '.join(sorted(clash))} name both a value and a module")

    def getattr_(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        # Through the import system always, not sys.modules: a module another thread is
        # still importing is there half made, and import_module waits for it to be whole
        # (two threads' first calls of the API raised AttributeError).
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    def dir_() -> list[str]:
        return sorted(namespace.get("__all__", names))

    return getattr_, dir_
