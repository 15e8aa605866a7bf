"""Plan: which layers form which segment, and where each segment goes (rules 4 and 5).

Pure functions over plain values; nothing here sees protobuf or ops. The plan's
size depends on layers and stages, not on ops. The table, the JSON, the plan
written into the program and the verifier all read the same `Plan`.

Terms: `pp` stages, `vpp` chunks per stage, `pp*vpp` segments. Segment k (its
virtual stage) holds a contiguous run of layers in program order and sits on
stage/chunk `place(k)` (`placement`). `partition` holds the options, the plan and
how it is made; `balanced` the balanced splits, the stage-balanced search among
them; `layout` Megatron-Core's layout language (`--layout`, and the layout of a plan);
`pirplan` the plan as Paddle's PIR completion takes it (the file `convert` writes for a
PIR program, which `vppctl.paddle.pir_plan` reads).

Other packages import these names from here, never a module of this package.
"""

# The plan's option types, re-exported: their one definition is vppctl.choices.
from vppctl.choices import MAX_DEGREE, CostKind, Mode, Placement, Split
from vppctl.plan.balanced import (
    IMPROVE_BUDGET,
    PROOF_BUDGET,
    StageSplit,
    balanced_sizes,
    stage_balanced_sizes,
    stage_balanced_split,
)
from vppctl.plan.layout import Finding as LayoutFinding
from vppctl.plan.layout import Layout, LayoutError, format_layout, layout_of_counts, layout_split
from vppctl.plan.layout import expand as expand_layout
from vppctl.plan.layout import lint as lint_layout
from vppctl.plan.layout import parse as parse_layout
from vppctl.plan.partition import (
    LayerFacts,
    Plan,
    PlanOptions,
    PlanSpec,
    Segment,
    check_manual_layout,
    choose_mode,
    explicit_sizes,
    keep_sizes,
    make_plan,
    segment_costs,
    uniform_sizes,
)
from vppctl.plan.pirplan import (
    PIR_PLAN_FORMAT,
    PIR_PLAN_VERSION,
    UNCOUNTED_OPS,
    PirPlan,
    paddle_layer,
    paddle_seg_method,
    program_digest,
    read_pir_plan,
)
from vppctl.plan.placement import (
    cannot_fill,
    place,
    stage_imbalance,
    stage_loads,
    virtual_stage,
    virtual_stages,
)

__all__ = [
    "IMPROVE_BUDGET",
    "MAX_DEGREE",
    "PIR_PLAN_FORMAT",
    "PIR_PLAN_VERSION",
    "PROOF_BUDGET",
    "UNCOUNTED_OPS",
    "CostKind",
    "LayerFacts",
    "Layout",
    "LayoutError",
    "LayoutFinding",
    "Mode",
    "PirPlan",
    "Placement",
    "Plan",
    "PlanOptions",
    "PlanSpec",
    "Segment",
    "Split",
    "StageSplit",
    "balanced_sizes",
    "cannot_fill",
    "check_manual_layout",
    "choose_mode",
    "expand_layout",
    "explicit_sizes",
    "format_layout",
    "keep_sizes",
    "layout_of_counts",
    "layout_split",
    "lint_layout",
    "make_plan",
    "paddle_layer",
    "paddle_seg_method",
    "parse_layout",
    "place",
    "program_digest",
    "read_pir_plan",
    "segment_costs",
    "stage_balanced_sizes",
    "stage_balanced_split",
    "stage_imbalance",
    "stage_loads",
    "uniform_sizes",
    "virtual_stage",
    "virtual_stages",
]
