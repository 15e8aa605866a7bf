"""The engine: a loaded program's facts, and the conversion's decisions and edits.

One scan of the program gives integer side tables (`index`); from them come the
facts the rules need: which forward op each backward op belongs to (`backward`),
the forward data flow and the gradients' (`flow`), the layers (`layers`,
`detect`), their costs (`cost`) and where each parameter lives (`moves`).
`precheck` refuses, with a fix, what no rule can convert; `apply` assigns every op
and variable its mesh and chunk and writes them in one pass. The plan itself is
`vppctl.plan`; checking the result is `vppctl.verify`.

This face holds the facts. The decisions, `precheck` and `apply`, are imported by
module and by the pipeline alone (`vppctl.convert`): the verifier checks a
program against the facts and the rules, never against the engine's own
decisions, and an import-linter contract keeps it so.
"""

from vppctl.engine.backward import NOP, ForwardOps
from vppctl.engine.cost import LayerCosts, layer_costs, param_elements
from vppctl.engine.detect import resolve_layers
from vppctl.engine.flow import (
    GradientFlow,
    cross_stage_edges,
    first_forward_writers,
    recomputed_ops,
)
from vppctl.engine.index import ProgramIndex, build_index, loss_op
from vppctl.engine.layers import (
    NO_LAYER,
    LayerSet,
    check_seg_method,
    compile_seg_method,
    find_layers,
    regex_budget,
    with_matches,
)
from vppctl.engine.moves import (
    Move,
    Place,
    parameter_bytes,
    parameter_moves,
    parameter_places,
    parameter_vars,
)

__all__ = [
    "NOP",
    "NO_LAYER",
    "ForwardOps",
    "GradientFlow",
    "LayerCosts",
    "LayerSet",
    "Move",
    "Place",
    "ProgramIndex",
    "build_index",
    "check_seg_method",
    "compile_seg_method",
    "cross_stage_edges",
    "find_layers",
    "first_forward_writers",
    "layer_costs",
    "loss_op",
    "param_elements",
    "parameter_bytes",
    "parameter_moves",
    "parameter_places",
    "parameter_vars",
    "recomputed_ops",
    "regex_budget",
    "resolve_layers",
    "with_matches",
]
