"""Rules: the numbered rules of `vppctl verify`, and the records a check returns.

Data only: each rule's id and statement (`RULES`, as docs/verify.md and `verify
--rules` list them), why a rule failed (`Cause`, one per failure, each of one
rule), a broken rule (`Violation`), and what a program is checked against
(`Expectation`). The checks themselves are `vppctl.verify.checks`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from vppctl.engine import LayerSet
from vppctl.mesh import MeshId
from vppctl.plan import Placement
from vppctl.program import RecordedPlan

RULES: dict[str, str] = {
    "V001": "every op of every executed block (block 0 and the blocks executed ops name as "
    "sub_block) has a process mesh and a chunk id",
    "V002": "every chunk id of an executed op lies in [0, vpp)",
    "V003": "every executed op's mesh is a stage mesh (optimizer and other non-forward, "
    "non-backward ops may also run on a mesh holding every stage's ranks: a global mesh, or a "
    "world an earlier program left)",
    "V004": "all ops of a layer share one stage and one chunk",
    "V005": "every layer lies in exactly one segment and every (stage, chunk) holds a layer "
    "(but the first or last virtual stage a PIR plan checked against, verify --plan, declares "
    "empty: embedding only, head only)",
    "V006": "segment k sits on the stage and chunk the placement gives (loop: k % pp, k // pp; "
    "with a PIR plan, the k-th of the virtual stages it fills)",
    "V007": "forward data flow never runs backwards through the virtual stages",
    "V008": "every grad op sits on its forward op's mesh and chunk (the loss-grad op on the "
    "loss op's)",
    "V009": "every sum/grad_add op sits on the mesh and chunk of the nearest earlier backward "
    "op that writes one of its inputs",
    "V010": "every optimizer op with a Param input sits on its parameter's mesh and chunk (in a "
    "program without a recorded vppctl plan, chunk 0 too: Paddle leaves optimizer chunk ids at "
    "0)",
    "V011": "every variable first written by a forward or backward op has that op's mesh and "
    "chunk (a sum/grad_add output: its forward variable's)",
    "V012": "the pipeline plan recorded in the program (or the PIR plan given, verify --plan) "
    "agrees with the ops: each segment's "
    "layers, stage, chunk, mesh and op range; known names (placement loop/v, mode auto/manual, "
    "split uniform/keep/balanced/explicit, cost params/ops/flops); uniform: equal layer counts; "
    "keep: each stage's layers dealt over its chunks, earlier chunks taking the extras",
    "V013": "every variable an op names is declared in its block or an ancestor (except names "
    "containing lod_tensor_blocking_queue: the reader's queue lives in the Scope)",
    "V014": "every sub_block attribute names an existing later block, without cycles",
    "V015": "the program has the stage and chunk counts asked for (--pp, --vpp, the recorded plan)",
    "V016": "every op of an executed sub-block sits on the mesh and chunk of an op that runs the "
    "block (so, recursively, of its op in the global block)",
    "V017": "every per-input/output tensor dist attr of an op that names a mesh names the op's own",
    "V018": "every parameter read before any op writes it sits on the mesh and chunk of the "
    "first forward op that reads it (a tied weight read on several stages: the first one's)",
    "V019": "a grad op's forward_op_id names a forward op it shares a variable with (one of the "
    "op's inputs or outputs, or the gradient of one)",
    "V020": "every backward op that reads the gradient of a forward op's output and writes the "
    "gradient of one of its inputs sits on that forward op's mesh and chunk (data flow, whatever "
    "forward_op_id says)",
    "V021": "every recomputed op (Paddle's recompute pass: a backward copy of a forward op whose "
    "outputs are renamed NAME.subprog_K) sits on its forward op's mesh and chunk",
}


# How the rules that carry over to a PIR program (Paddle 3.x, read by vppctl.program.pir) in
# part apply to it, and why; every other rule applies as stated.
PIR_RULES: dict[str, str] = {
    "V001": "the mesh only: Paddle's PIR completion leaves chunk id -1 on the ops outside the "
    "layers that its later per-rank pass (check_chunk_id, after partitioning) fills in, and on "
    "every optimizer op",
    "V011": "the mesh only, and a sum's output on its writer's mesh: a PIR value has no chunk id "
    "(its dist attr is a mesh, dims mapping and partial status), and it is where the op that "
    "computes it runs (an explicit reshard, read through, moves it)",
    "V017": "not on optimizer ops on a mesh holding every stage's ranks (AMP's "
    "check_finite_and_unscale_): a PIR operand dist attr names where the operand lives, and "
    "such an op reads every stage's tensors",
    "V018": "the mesh only: a PIR value has no chunk id",
}


class Cause(str, Enum):
    """Why a rule failed, for programs (the message is for people and may be reworded).

    Each cause belongs to one rule (`cause.rule`); its value is the token the JSON shows."""

    rule: str

    def __new__(cls, value: str, rule: str) -> Cause:
        cause = str.__new__(cls, value)
        cause._value_ = value
        cause.rule = rule
        return cause

    NO_MESH = ("no_mesh", "V001")  # an op without a process mesh
    NO_CHUNK = ("no_chunk", "V001")  # an op without a chunk id
    CHUNK_OUT_OF_RANGE = ("chunk_out_of_range", "V002")
    NOT_STAGE_MESH = ("not_stage_mesh", "V003")
    LAYER_SPLIT = ("layer_split", "V004")  # a layer's ops on more than one (stage, chunk)
    LAYER_OFF_STAGE = ("layer_off_stage", "V005")  # a layer not on a stage mesh
    LAYERS_NOT_FOUND = ("layers_not_found", "V005")
    SEGMENT_TWICE = ("segment_twice", "V005")  # one (stage, chunk) holds two runs of layers
    EMPTY_SEGMENT = ("empty_segment", "V005")
    SEGMENT_MISPLACED = ("segment_misplaced", "V006")
    BACKWARD_FLOW = ("backward_flow", "V007")  # forward data flow runs to an earlier virtual stage
    GRAD_MISPLACED = ("grad_misplaced", "V008")
    SUM_MISPLACED = ("sum_misplaced", "V009")
    UPDATE_MISPLACED = ("update_misplaced", "V010")
    VAR_MISPLACED = ("var_misplaced", "V011")  # a variable not where its first writer is
    PLAN_MISMATCH = ("plan_mismatch", "V012")
    PLAN_CORRUPT = ("plan_corrupt", "V012")
    UNDECLARED_VAR = ("undeclared_var", "V013")
    DUPLICATE_VAR = ("duplicate_var", "V013")
    BAD_SUB_BLOCK = ("bad_sub_block", "V014")
    COUNT_MISMATCH = ("count_mismatch", "V015")  # stage or chunk counts differ from those asked for
    UPDATE_OFF_CHUNK = ("update_off_chunk", "V010")  # an update on another chunk than its parameter
    SUB_BLOCK_MISPLACED = (
        "sub_block_misplaced",
        "V016",
    )  # a sub-block op away from the op running it
    TENSOR_MESH_MISMATCH = ("tensor_mesh_mismatch", "V017")  # a tensor dist attr on another mesh
    PARAM_MISPLACED = ("param_misplaced", "V018")  # a parameter away from its first forward reader
    FORWARD_LINK_CONTRADICTED = ("forward_link_contradicted", "V019")  # forward_op_id vs data flow
    GRAD_OFF_DATA_FLOW = (
        "grad_off_data_flow",
        "V020",
    )  # a gradient away from the op it differentiates
    # A grad op where its forward_op_id puts it, on another op than the one the data flow says
    # it differentiates (an input whose links and data flow disagree).
    LINK_OFF_DATA_FLOW = ("link_off_data_flow", "V020")
    RECOMPUTE_MISPLACED = (
        "recompute_misplaced",
        "V021",
    )  # a recomputed op away from its forward op


@dataclass(frozen=True)
class Violation:
    """One broken rule: where (block, op and its type) and why (`cause`, for programs;
    `message`, for people)."""

    cause: Cause
    block: int
    op: int  # -1 when the violation is not about one op
    type: str
    message: str

    @property
    def rule(self) -> str:
        return self.cause.rule


@dataclass(frozen=True)
class Expectation:
    """What the program is checked against (from options, the recorded plan, or the program)."""

    pp: int
    vpp: int
    placement: Placement
    stage_mesh_ids: tuple[MeshId, ...]  # in stage order
    global_mesh_ids: tuple[MeshId, ...]
    layers: LayerSet | None
    plan_segments: tuple[tuple[int, int, tuple[str, ...]], ...] | None = (
        None  # (stage, chunk, layers)
    )
    recorded: RecordedPlan | None = None  # the whole plan, for V012's other checks
    pir: bool = False  # read from Paddle's PIR JSON: the rules of PIR_RULES apply in part
    # (stage, chunk) of the segments a PIR plan (`verify --plan`) declares empty: its first
    # (embedding only) or last (head only) virtual stage; V005 and V006 read the plan's
    # other virtual stages as the segments
    empty_segments: frozenset[tuple[int, int]] = frozenset()
