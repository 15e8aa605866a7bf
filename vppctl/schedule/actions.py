"""Actions: one pass of one micro-batch through one chunk, the unit every order is made of.

Kinds: ``F`` forward; ``B`` full backward (input and weight gradients in one pass);
``I`` input-gradient backward (sends the gradient upstream); ``W`` weight-gradient
backward (local; needs its ``I`` first). The order builders (`orders`, `interleaving`,
`vshape`) share this vocabulary, so it lives apart from them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["F", "B", "I", "W"]


@dataclass(frozen=True)
class Op:
    """One action in a stage's order: its kind, micro-batch and chunk on that stage."""

    kind: Kind
    micro_batch: int
    chunk: int

    @property
    def label(self) -> str:
        """Short name, e.g. ``F3.c1`` for the forward of micro-batch 3 through chunk 1."""
        return f"{self.kind}{self.micro_batch}.c{self.chunk}"


def warmup_then_steady(forwards: list[Op], backwards: list[Op], warmup: int) -> list[Op]:
    """``warmup`` forwards, then alternate one forward and one backward, then drain:
    the shape of every 1F1B-like order (warm-up, steady 1F1B, cool-down)."""
    total = len(forwards)
    order = list(forwards[:warmup])
    for i in range(total - warmup):
        order += [forwards[warmup + i], backwards[i]]
    return order + list(backwards[total - warmup :])
