"""Literals: text-format string literals cut short enough for protobuf's tokenizer.

protobuf's text parser finds a string literal with the regular expression
`"[^"\\n\\\\]*((\\\\.)+[^"\\n\\\\]*)*"`, whose nested repeats keep backtracking
state for every escape in the literal: about 600 bytes each, so a 4 MB file of
`\\000` escapes took 560 MB and 16 MB took 1.8 GB, against a bound of 3x the file
plus 200 MB (docs/io.md: Bounds). Text format joins adjacent literals ("ab" "cd" is
"abcd"), so `cut_long_literals` closes and reopens every literal after
ESCAPES_PER_LITERAL escapes, before an escape (never inside one): the same
program, read in bounded memory. A text with fewer backslashes than that in all
is returned as it is, at the cost of one count.
"""

from __future__ import annotations

import re

ESCAPES_PER_LITERAL = 4096  # about 2.5 MB of the tokenizer's state per literal at most

_SPECIAL = re.compile(r"[\"'#\n\\]")  # what can start or end a literal, a comment, an escape


def cut_long_literals(text: str, limit: int = ESCAPES_PER_LITERAL) -> str:
    """`text` (protobuf text format) with every string literal of more than `limit` escapes
    cut into adjacent literals of at most `limit` escapes each."""
    if text.count("\\") <= limit:
        return text
    out: list[str] = []
    done = pos = 0  # text[:done] is in `out`; the scan is at `pos`
    quote = ""  # the quote of the literal the scan is in ("" outside one)
    escapes = 0
    search = _SPECIAL.search
    while (found := search(text, pos)) is not None:
        at = found.start()
        char = text[at]
        if not quote:
            if char == "#":  # a comment, to the end of its line
                end = text.find("\n", at)
                pos = len(text) if end < 0 else end + 1
                continue
            if char in "\"'":
                quote, escapes = char, 0
            pos = at + 1
        elif char == "\\":
            escapes += 1
            if escapes > limit:
                out += (text[done:at], quote, " ", quote)  # close, reopen, then the escape
                done, escapes = at, 1
            pos = at + 2
        else:
            if char in (quote, "\n"):  # the literal ends (a newline: the parser says so)
                quote = ""
            pos = at + 1
    out.append(text[done:])
    return "".join(out)
