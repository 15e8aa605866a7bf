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

The same characters are what XML 1.0 cannot hold (a C0 control but tab, newline and
carriage return; a lone surrogate; U+FFFE and U+FFFF), so text through `printable` is
also well-formed in the JUnit report and the SVG timeline (after `&`, `<` and `>` are
escaped as usual); and a lone surrogate (a file name that is not UTF-8, as Python
decodes it from the command line, `\\udcff`) can be written to any UTF-8 stream.
"""

from __future__ import annotations

import re

# C0 controls (newline and tab included), DEL, C1 controls, the line and paragraph
# separators, the bidirectional embeddings, overrides and isolates, lone surrogates (no
# stream can encode one), and U+FFFE and U+FFFF (the two non-characters XML 1.0 forbids).
_CONTROL = re.compile(
    "[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]"
)


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


def github_data(text: str) -> str:
    """`text` as the message of a GitHub Actions workflow command (`::error ...::MESSAGE`):
    `%`, CR and LF escaped, so that one line is one command."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def github_property(text: str) -> str:
    """`text` as a property of a workflow command (`file=...,title=...`): also `:` and `,`."""
    return github_data(text).replace(":", "%3A").replace(",", "%2C")
