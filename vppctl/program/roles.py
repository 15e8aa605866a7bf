"""Op roles: Paddle's `op_role` values and the one set of predicates every module uses.

Paddle's `OpRole` is a bit set: 0 forward, 1 backward, 2 optimize, 256 loss
(256 is the loss op, 257 = loss | backward the loss-grad op). Other bits (RPC,
dist, LRSched) mark ops of other passes. An op's *kind* is one of "forward",
"backward", "optimizer" and "other". One role no bit says is named by op type: the
backward ops that add up a variable's gradient parts (`GRAD_SUMS`).
"""

from __future__ import annotations

from typing import Literal, get_args

FORWARD = 0
BACKWARD = 1
OPTIMIZE = 2
LOSS = 256
LOSS_GRAD = LOSS | BACKWARD
FORWARD_ROLES = frozenset({FORWARD, LOSS})  # for `role in FORWARD_ROLES` in hot loops

# The op types that add up a variable's gradient parts: legacy Paddle's `sum` and
# `grad_add`, PIR's `pd_op.add_n` and its in-place form `pd_op.add_n_` (Paddle's PIR
# backward places both as sums, ir_backward.py). Each is a sum only in the backward.
GRAD_SUM_TYPES = frozenset({"sum", "grad_add", "pd_op.add_n", "pd_op.add_n_"})
GRAD_SUMS = frozenset(t.encode() for t in GRAD_SUM_TYPES)  # as the op columns hold types

OpKind = Literal["forward", "backward", "optimizer", "other"]
KINDS: tuple[OpKind, ...] = get_args(OpKind)


def is_forward(role: int) -> bool:
    """A forward op: role 0, or the loss op (256)."""
    return role in FORWARD_ROLES


def is_backward(role: int) -> bool:
    """A backward op (the backward bit; the loss-grad op included)."""
    return bool(role & BACKWARD)


def is_loss_grad(role: int) -> bool:
    return role == LOSS_GRAD


def kind(role: int) -> OpKind:
    """An op's kind from its role."""
    if is_forward(role):
        return "forward"
    if role & BACKWARD:
        return "backward"
    return "optimizer" if role & OPTIMIZE else "other"
