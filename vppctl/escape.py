"""The one escaping of names for people: control characters in a string from a program
shown as visible escapes, so that a received program cannot drive the terminal.

A layer name or op type is data. Printed raw, ESC starts a terminal command (clear the
screen, set the window title), BEL rings, CR and a newline forge lines in a CI log, NUL
and C1 controls confuse tools that read the log, and the bidirectional overrides reorder
what is shown (Trojan Source); a lone surrogate (what a JSON `\\ud800` escape decodes to)
cannot be written to any stream at all. `printable` shows each as Python does in a string literal
(`\\x1b`, `\\r`, `\\n`, `\\u202e`); every other character, backslash included, is kept, so
ordinary names read as they are. Every error message is escaped when it is made
(`vppctl.errors.VppctlError`), so the `Error:` line and `--json` say the same; tables,
notes and warnings are escaped when printed (`vppctl.report.printed`, `vppctl.cli`).
JSON values other than messages keep names exact: JSON escapes control characters
itself.
"""

from __future__ import annotations

import re

# C0 controls (newline and tab included), DEL, C1 controls, the line and paragraph
# separators, the bidirectional embeddings, overrides and isolates, and lone surrogates
# (no character: no stream can encode one, so printed raw they would crash the print).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if char in _SHORT:
        return _SHORT[char]
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with every control character shown as an escape (module docstring)."""
    return _CONTROL.sub(_escape, text)
