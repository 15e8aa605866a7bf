"""Fixtures for the Paddle bridge tests: a small GPT-like legacy static program, annotated
for plain pipeline parallelism, completed by Paddle's own auto-parallel Completer.

Paddle 3.3.1 facts this file works around (see the test module's docstring for more):

* Legacy static mode must be chosen before ``import paddle``
  (``FLAGS_enable_pir_api=0``); ``paddle.pir_utils.OldIrGuard`` guards each build
  in case another test imported paddle first in PIR mode.
* In legacy mode some high-level APIs reject legacy ``Variable`` objects
  (``F.gelu``, ``paddle.sqrt``, ``paddle.matmul``: "must be Value, but got
  Variable"), so those ops are appended with ``LayerHelper``. ``nn.Linear``,
  ``nn.LayerNorm``, ``nn.Embedding`` and ``+`` still work. ``ClipGradByGlobalNorm``
  fails in ``_static_clip`` (``paddle.sqrt``), so ``LegacyGlobalNormClip`` below
  appends the same op sequence (squared_l2_norm per grad, sum, sqrt,
  fill_constant, elementwise_max, elementwise_div, elementwise_mul per grad) in
  the ``gradient_clip`` name scope with the Optimize role.
* Layer paths (``Operator.struct_name``) come from ``nn.Layer.__call__``, which
  wraps ``forward`` in ``paddle.base.framework.name_struct(ClassName)``; sibling
  names are numbered ``X``, ``X_1``, ``X_2``, ... in a process-global tree, so
  every build resets that tree to get ``/GPTModel/DecoderLayer_3/...`` again.
* ``paddle.distributed.ProcessMesh(...)`` registers itself in the *default*
  distributed context and process group 0 (both process-global); a
  ``DistributedContext`` copies the default context's meshes when it initializes,
  and ``ClipGradByGlobalNorm`` completion uses process group 0's ranks as the
  "world" mesh. Every build therefore starts from a fresh default context and
  fresh process groups (`real_programs.reset_paddle_globals`: the world group is emptied
  in place, since the AMP pass holds it).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# Must happen before paddle is imported anywhere in this process.
os.environ["FLAGS_enable_pir_api"] = "0"  # noqa: SIM112 (Paddle reads this exact name)

#: Where the reference programs for engine development are written.
PROGS_DIR = Path(os.environ.get("VPPCTL_PADDLE_PROGS", "/tmp/paddle_progs"))

SEG_METHOD = "DecoderLayer"


@dataclass
class Built:
    """A completed program and its dist context."""

    main: Any
    startup: Any
    dist_context: Any
    loss: Any
    pp: int
    vpp: int
    n_layers: int
    clip: bool


def _reset_paddle_globals() -> None:
    from real_programs import reset_paddle_globals

    reset_paddle_globals()


def _model_classes() -> dict[str, Any]:
    """The model's layer classes (defined lazily: they subclass paddle.nn.Layer)."""
    import paddle
    from paddle import nn
    from paddle.base.layer_helper import LayerHelper

    def append(
        op_type: str,
        inputs: dict[str, list[Any]],
        outs: list[str],
        attrs: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        helper = LayerHelper(op_type)
        made = {slot: helper.create_variable_for_type_inference("float32") for slot in outs}
        helper.append_op(
            type=op_type,
            inputs=inputs,
            outputs={slot: [var] for slot, var in made.items()},
            attrs=attrs or {},
        )
        return made

    class MLP(nn.Layer):
        def __init__(self, hidden: int) -> None:
            super().__init__()
            self.fc1 = nn.Linear(hidden, 4 * hidden)  # matmul_v2 + elementwise_add
            self.fc2 = nn.Linear(4 * hidden, hidden)

        def forward(self, x: Any) -> Any:
            y = self.fc1(x)
            y = append("gelu", {"X": [y]}, ["Out"], {"approximate": False})["Out"]
            return self.fc2(y)

    class DecoderLayer(nn.Layer):
        def __init__(self, hidden: int) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(hidden)
            self.mlp = MLP(hidden)

        def forward(self, x: Any) -> Any:
            return x + self.mlp(self.norm(x))  # residual elementwise_add

    class LMHead(nn.Layer):
        def __init__(self, hidden: int, vocab: int) -> None:
            super().__init__()
            self.weight = self.create_parameter([hidden, vocab])

        def forward(self, x: Any) -> Any:
            return append(
                "matmul_v2",
                {"X": [x], "Y": [self.weight]},
                ["Out"],
                {"trans_x": False, "trans_y": False},
            )["Out"]

    class GPTModel(nn.Layer):
        """Embedding, decoder layers in stage blocks (layer i on stage i*pp//N), norm, head."""

        def __init__(self, vocab: int, hidden: int, n_layers: int, meshes: list[Any]) -> None:
            super().__init__()
            pp = len(meshes)
            self.meshes = meshes
            self.stage_of = [i * pp // n_layers for i in range(n_layers)]
            with meshes[0]:
                self.embeddings = nn.Embedding(vocab, hidden)
            self.layers = nn.LayerList()
            for i in range(n_layers):
                with meshes[self.stage_of[i]]:
                    self.layers.append(DecoderLayer(hidden))
            with meshes[-1]:
                self.norm = nn.LayerNorm(hidden)
                self.head = LMHead(hidden, vocab)

        def forward(self, ids: Any) -> Any:
            with self.meshes[0]:
                x = self.embeddings(ids)
            for i, layer in enumerate(self.layers):
                with self.meshes[self.stage_of[i]]:
                    x = layer(x)
            with self.meshes[-1]:
                return self.head(self.norm(x))

    class Criterion(nn.Layer):
        def forward(self, logits: Any, labels: Any) -> Any:
            loss = append(
                "softmax_with_cross_entropy",
                {"Logits": [logits], "Label": [labels]},
                ["Softmax", "Loss"],
                {
                    "soft_label": False,
                    "ignore_index": -100,
                    "numeric_stable_mode": True,
                    "axis": -1,
                },
            )["Loss"]
            return append("mean", {"X": [loss]}, ["Out"])["Out"]

    class LegacyGlobalNormClip(paddle.nn.ClipGradByGlobalNorm):
        """ClipGradByGlobalNorm whose static path builds its ops with LayerHelper."""

        def _static_clip(self, params_grads: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
            from paddle.base import core, framework

            pairs = [(p, g) for p, g in params_grads if g is not None]
            if not pairs:
                return params_grads
            prog = pairs[0][0].block.program
            with framework.name_scope("gradient_clip"):
                squares = []
                for p, g in pairs:
                    with prog._optimized_guard([p, g]):
                        squares.append(append("squared_l2_norm", {"X": [g]}, ["Out"])["Out"])
                p, g = pairs[-1]
                with prog._optimized_guard([p, g]):
                    total = append("sum", {"X": squares}, ["Out"])["Out"]
                    norm = append("sqrt", {"X": [total]}, ["Out"])["Out"]
                    limit = append(
                        "fill_constant",
                        {},
                        ["Out"],
                        {
                            "shape": [1],
                            "dtype": int(core.VarDesc.VarType.FP32),
                            "value": float(self.clip_norm),
                        },
                    )["Out"]
                    top = append(
                        "elementwise_max", {"X": [limit], "Y": [norm]}, ["Out"], {"axis": -1}
                    )["Out"]
                    scale = append(
                        "elementwise_div", {"X": [limit], "Y": [top]}, ["Out"], {"axis": -1}
                    )["Out"]
                for p, g in pairs:
                    with prog._optimized_guard([p, g]):
                        prog.current_block().append_op(
                            type="elementwise_mul",
                            inputs={"X": [g], "Y": [scale]},
                            outputs={"Out": [g]},
                            attrs={"axis": -1},
                        )
            return pairs

    return {
        "GPTModel": GPTModel,
        "Criterion": Criterion,
        "LegacyGlobalNormClip": LegacyGlobalNormClip,
    }


def build_gpt(
    pp: int,
    n_layers: int,
    *,
    vpp: int = 1,
    schedule_mode: str = "VPP",
    clip: bool = False,
    ranks_per_stage: int = 1,
    complete: bool = True,
    vocab: int = 32,
    hidden: int = 8,
    batch: int = 2,
    seq: int = 4,
) -> Built:
    """Build the GPT-like program with plain-PP stage meshes and complete it with Paddle.

    ``vpp == 1`` gives the plain-PP completion (every chunk id 0); ``vpp > 1``
    turns on Paddle's own PP->VPP conversion (``schedule_mode="VPP"``,
    ``vpp_seg_method="DecoderLayer"``; ``schedule_mode="ZBVPP"`` for the V shape).
    With ``complete=False`` the program is built but not completed and has no
    backward or optimizer part.
    """
    import paddle
    from paddle.distributed import ProcessMesh
    from paddle.distributed.auto_parallel.static.completion import Completer
    from paddle.distributed.auto_parallel.static.dist_context import DistributedContext
    from paddle.distributed.auto_parallel.strategy import Strategy

    paddle.enable_static()
    with paddle.pir_utils.OldIrGuard():
        _reset_paddle_globals()
        classes = _model_classes()
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup), paddle.utils.unique_name.guard():
            meshes = [
                ProcessMesh(
                    list(range(s * ranks_per_stage, (s + 1) * ranks_per_stage)),
                    dim_names=["dp"],
                )
                for s in range(pp)
            ]
            ids = paddle.static.data("input_ids", [batch, seq], "int64")
            labels = paddle.static.data("labels", [batch, seq, 1], "int64")
            model = classes["GPTModel"](vocab, hidden, n_layers, meshes)
            logits = model(ids)
            with meshes[-1]:
                loss = classes["Criterion"]()(logits, labels)
            if not complete:
                return Built(main, startup, None, loss, pp, vpp, n_layers, clip)

            strategy = Strategy()
            strategy.auto_mode = "semi"
            strategy.pipeline.enable = True
            strategy.pipeline.vpp_degree = vpp
            if vpp > 1:
                strategy.pipeline.vpp_seg_method = SEG_METHOD
                strategy.pipeline.schedule_mode = schedule_mode
            grad_clip = classes["LegacyGlobalNormClip"](1.0) if clip else None
            optimizer = paddle.optimizer.AdamW(1e-3, grad_clip=grad_clip)
            dist_context = DistributedContext(
                main,
                startup,
                optimizer,
                loss,
                {"inputs": [ids], "labels": [labels]},
                {"loss": [loss]},
                strategy=strategy,
            )
            completer = Completer(dist_context)
            completer.complete_forward_annotation(main)
            params_grads = paddle.static.append_backward(
                loss, distop_context=dist_context.dist_op_context
            )
            completer.complete_backward_annotation(main)
            optimizer.apply_gradients(params_grads)
            completer.complete_update_annotation(main)
    return Built(main, startup, dist_context, loss, pp, vpp, n_layers, clip)


@pytest.fixture(scope="session")
def keep_export() -> Callable[[str, bytes], None]:
    """`keep` for a test: an export written to ``PROGS_DIR``, for refreshing references."""
    return keep


def keep(name: str, data: bytes) -> None:
    """Write one export to ``PROGS_DIR`` whole (test workers running side by side may
    write the same file: each renames a complete copy into place)."""
    PROGS_DIR.mkdir(parents=True, exist_ok=True)
    temporary = PROGS_DIR / f".{name}.{os.getpid()}.tmp"
    temporary.write_bytes(data)
    os.replace(temporary, PROGS_DIR / name)


@pytest.fixture
def gpt_builder() -> Callable[..., Built]:
    """``build_gpt`` as a fixture (tests here do not import conftest)."""
    return build_gpt


def n_layers_for(pp: int, vpp: int) -> int:
    """8 decoder layers when pp*vpp divides 8, else 16."""
    return 8 if 8 % (pp * vpp) == 0 else 16


@dataclass
class Reference:
    """The exports of one configuration: Paddle's plain-PP and Paddle's own VPP completion."""

    pp: int
    vpp: int
    clip: bool
    n_layers: int
    plain: bytes
    paddle_vpp: bytes


@pytest.fixture(scope="session")
def paddle_reference() -> Callable[[int, int, bool], Reference]:
    """Exports per (pp, vpp, clip), built once per session and written to ``PROGS_DIR``.

    Files: ``pp{P}_v{V}_{clip|noclip}_{plain|paddlevpp}.pb``.
    """
    from vppctl.paddle import export_program

    cache: dict[tuple[int, int, bool], Reference] = {}

    def get(pp: int, vpp: int, clip: bool) -> Reference:
        key = (pp, vpp, clip)
        if key not in cache:
            n = n_layers_for(pp, vpp)
            plain = build_gpt(pp, n, clip=clip)
            paddle_vpp = build_gpt(pp, n, vpp=vpp, clip=clip)
            ref = Reference(
                pp,
                vpp,
                clip,
                n,
                export_program(plain.main, plain.dist_context),
                export_program(paddle_vpp.main, paddle_vpp.dist_context),
            )
            tag = f"pp{pp}_v{vpp}_{'clip' if clip else 'noclip'}"
            keep(f"{tag}_plain.pb", ref.plain)
            keep(f"{tag}_paddlevpp.pb", ref.paddle_vpp)
            cache[key] = ref
        return cache[key]

    return get


# ----------------------------------------------------------------------------
# Real training programs (issue 11): tests/support/real_programs.py


@dataclass
class RealCase:
    """One real program: Paddle's plain-PP export (vppctl's input), Paddle's own VPP
    answer, and plain builds to apply annotations to."""

    case: Any  # real_programs.Case
    plain: bytes
    paddle_vpp: bytes
    pristine: Any  # the plain build `plain` was exported from, until a test takes it
    converted: bytes | None = None  # vppctl's conversion of `plain`
    roundtrip: bytes | None = None  # `converted` applied onto a plain build, exported
    failure: Exception | None = None  # why vppctl could not convert `plain`

    def target(self) -> Any:
        """A plain build that nothing was applied to: the exported one first (exporting
        does not change it), then fresh builds."""
        from real_programs import build_case

        if self.pristine is not None:
            built, self.pristine = self.pristine, None
            return built
        return build_case(self.case, 1)

    def vppctl_roundtrip(self) -> bytes:
        """`plain` converted by vppctl (`--vpp V --seg-method <layer class>`), applied
        onto a plain build with the bridge and exported again; computed once."""
        if self.roundtrip is None and self.failure is None:
            from vppctl.convert import ConvertOptions, convert_program
            from vppctl.errors import VppctlError
            from vppctl.paddle import apply_annotations, export_program
            from vppctl.plan import PlanOptions
            from vppctl.program.load import parse_program

            program = parse_program(self.plain)
            opts = ConvertOptions(
                plan=PlanOptions(vpp=self.case.vpp), seg_method=self.case.seg_method
            )
            try:
                convert_program(program, opts)
            except VppctlError as exc:
                self.failure = exc
            else:
                self.converted = program.to_bytes()
                built = self.target()
                apply_annotations(built.main, built.dist_context, self.converted)
                self.roundtrip = export_program(built.main, built.dist_context)
        if self.failure is not None:
            raise self.failure
        assert self.roundtrip is not None
        return self.roundtrip


@pytest.fixture(scope="session")
def real_case() -> Callable[[str], RealCase]:
    """Real programs by case name, built once per session (plain and Paddle's VPP), their
    exports written to ``PROGS_DIR`` as ``{name}_plain.pb`` and ``{name}_paddlevpp.pb``."""
    from real_programs import CASES_BY_NAME, build_case

    from vppctl.paddle import export_program

    cache: dict[str, RealCase] = {}

    def get(name: str) -> RealCase:
        if name not in cache:
            case = CASES_BY_NAME[name]
            plain = build_case(case, 1)
            paddle_vpp = build_case(case, case.vpp)
            found = RealCase(
                case,
                export_program(plain.main, plain.dist_context),
                export_program(paddle_vpp.main, paddle_vpp.dist_context),
                plain,
            )
            keep(f"{name}_plain.pb", found.plain)
            keep(f"{name}_paddlevpp.pb", found.paddle_vpp)
            cache[name] = found
        return cache[name]

    return get
