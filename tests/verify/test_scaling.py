"""The new rules stay linear on hostile shapes: work (counted, as in test_scaling) for a
program of twice the size is at most 2.5x, where a quadratic step would give about 4x.

The shapes are the ones a naive rule would make quadratic: many backward ops naming one
forward op with many inputs (V019, V020), and one sub-block with many ops that many ops
run (V016).
"""

from __future__ import annotations

from programs import BACKWARD, Prog
from workcount import MAX_RATIO, WorkCounter

from vppctl.program.load import parse_program
from vppctl.verify import VerifyOptions
from vppctl.verify.expectation import verify_program


def _verify_work(data: bytes) -> int:
    program = parse_program(data)
    with WorkCounter() as counter:
        verify_program(program, VerifyOptions(vpp=1))
    return counter.work


def _one_wide_forward_op(n: int, *, claimed: bool) -> bytes:
    """A concat of n inputs and n backward ops: each the gradient of one input (by its
    type and the data flow), or with `claimed` each naming the concat by forward_op_id
    while reading another variable's gradient."""
    p = Prog(stages=1)
    xs = [f"x{i}" for i in range(n)]
    for x in xs:
        p.var(x)
    concat = p.op("concat", {"X": xs}, {"Out": ["y"]}, struct="/M/", op_id=1)
    assert concat == 0
    p.var("z")
    for x in xs:
        if claimed:
            p.op(
                "relu_grad",
                {"Out@GRAD": ["z@GRAD"]},
                {"X@GRAD": [f"{x}@GRAD"]},
                role=BACKWARD,
                op_id=None,
                forward_op_id=1,
            )
        else:
            p.op(
                "concat_grad",
                {"Out@GRAD": ["y@GRAD"]},
                {"X@GRAD": [f"{x}@GRAD"]},
                role=BACKWARD,
                op_id=None,
            )
    return p.bytes()


def test_gradients_of_one_wide_forward_op_are_checked_in_linear_work() -> None:
    for claimed in (False, True):
        small = _verify_work(_one_wide_forward_op(300, claimed=claimed))
        big = _verify_work(_one_wide_forward_op(600, claimed=claimed))
        assert big / small <= MAX_RATIO, (claimed, small, big)


def _one_shared_sub_block(n: int) -> bytes:
    """A sub-block of n ops that n global-block ops all run."""
    p = Prog(stages=1)
    b = p.sub_block(0)
    for i in range(n):
        p.op("relu", {"X": ["h"]}, {"Out": [f"s{i}"]}, block=b)
    for i in range(n):
        p.op("while", {"X": ["h"]}, {"Out": [f"w{i}"]}, struct="/M/", sub_block=b)
    return p.bytes()


def test_a_sub_block_many_ops_run_is_checked_in_linear_work() -> None:
    small, big = _verify_work(_one_shared_sub_block(300)), _verify_work(_one_shared_sub_block(600))
    assert big / small <= MAX_RATIO, (small, big)
