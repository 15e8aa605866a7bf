"""Long text-format string literals are cut into adjacent ones (vppctl/program/literals.py).

protobuf's tokenizer keeps ~600 bytes of state per escape of a literal; cutting every
literal after a few thousand escapes bounds that, and text format joins adjacent literals,
so the program read is the same. tests/contract/test_bounds.py measures the memory.
"""

from __future__ import annotations

import random

import pytest
from google.protobuf import text_format

from vppctl.program._proto import program_pb2 as pb
from vppctl.program.literals import cut_long_literals

# Escapes of every kind; "\\303\\251" is UTF-8 for e-acute in two escapes (a cut may fall
# between them: literals are joined before the string is decoded).
ESCAPES = ["\\000", "\\n", "\\\\", '\\"', "\\'", "\\x41", "\\303\\251", "\\t"]


def program_text(names: list[str], comment: str = "") -> str:
    """A one-op program whose struct name and attr strings are `names`' literals."""
    attrs = "".join(f'attrs {{ name: "a{k}" type: STRING s: {n} }} ' for k, n in enumerate(names))
    return (
        f'{comment}blocks {{ idx: 0 parent_idx: -1 ops {{ type: "x" {attrs}'
        f"struct_name: {names[0]} }} }}\n"
    )


def parsed(text: str) -> pb.ProgramDesc:
    return text_format.Parse(text, pb.ProgramDesc())


def test_a_text_with_few_backslashes_is_left_as_it_is() -> None:
    text = program_text(['"/M/Layer\\n/"'])
    assert cut_long_literals(text, limit=8) is text


@pytest.mark.parametrize("seed", range(6))
def test_cut_literals_read_as_the_program_they_come_from(seed: int) -> None:
    rng = random.Random(seed)
    names = []
    for _ in range(3):
        quote = rng.choice("\"'")
        body = "".join(
            rng.choice([*ESCAPES, "a", "#", "'" if quote == '"' else '"', "é"])
            for _ in range(rng.randrange(50, 400))
        )
        names.append(quote + body + quote)
    comment = "# a comment with \"quotes\\\\ and 'escapes\\n\n"
    text = program_text(names, comment)
    cut = cut_long_literals(text, limit=7)
    assert cut != text and cut.count("\\") == text.count("\\")
    assert parsed(cut) == parsed(text)


def test_no_literal_is_left_with_more_escapes_than_the_limit() -> None:
    text = program_text(['"' + "\\000" * 100 + '"'])
    cut = cut_long_literals(text, limit=10)
    literals = [p for p in cut.split('"') if "\\" in p]
    assert literals and max(p.count("\\") for p in literals) == 10
    assert parsed(cut).blocks[0].ops[0].struct_name == "\x00" * 100


def test_an_unterminated_literal_is_still_a_parse_error() -> None:
    text = 'blocks { idx: 0 parent_idx: -1 ops { type: "' + "\\n" * 40 + "\n} }"
    with pytest.raises(text_format.ParseError):
        parsed(cut_long_literals(text, limit=8))
