"""Lazy faces: a package's public names, each imported from its module on first use.

A package whose modules are costly to import (the simulator, the planner, the
whole API) lists its names here instead of importing them, so that importing
one light module of it, or `vppctl --help`, does not load the rest. Type
checkers read the same names from the package's `if TYPE_CHECKING:` imports.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def face(
    package: str, names: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """(`__getattr__`, `__dir__`) for `package`: `names` maps each public name to the module
    (relative to `package`) that defines it; a name once loaded is kept in `namespace`.

    No name may be a module's: importing a submodule sets the package's attribute of that
    name to the module, and the face would then hand out the module instead."""
    clash = set(names) & set(names.values())
    if clash:
        raise ValueError(f"{package}: {', '.join(sorted(clash))} name both a value and a module")

    def getattr_(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value  # later lookups skip this function
        return value

    def dir_() -> list[str]:
        return sorted(namespace.get("__all__", names))

    return getattr_, dir_
