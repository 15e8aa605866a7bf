"""Which layers: the one policy (`resolve_layers`), and detection from struct names.

`resolve_layers` is how every command finds the layer set: an explicit
--seg-method regex first, else the regex a recorded plan carries, else
detection.

Detection, when no --seg-method is given:

A candidate is a layer class (a struct-name component with its `_k` suffix
removed) under one parent path, with at least two sibling instances
(`/GPTModel/DecoderLayer`, `/GPTModel/DecoderLayer_1`, ...). The candidate
covering the most forward ops wins if its instances are contiguous op runs;
a tie is refused with the candidates listed. The winner becomes an exact regex,
so the result is the same as passing that regex with --seg-method.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from vppctl.engine.index import ProgramIndex
from vppctl.engine.layers import LayerSet, compile_seg_method, find_layers
from vppctl.errors import ConversionError, UsageError
from vppctl.program import RecordedPlan, is_forward

_SUFFIX = re.compile(r"_\d+$")


@dataclass(frozen=True)
class LayerCandidate:
    parent: str  # e.g. "/GPTModel"
    layer_class: str  # e.g. "DecoderLayer"
    instances: int
    ops: int

    @property
    def regex(self) -> str:
        """Matches exactly this candidate's instances, as --seg-method would."""
        return (
            f"(?<=^{re.escape(self.parent)}/){re.escape(self.layer_class)}"
            r"(?:_\d+)?(?=/)"
        )

    def __str__(self) -> str:
        return f"{self.layer_class} x {self.instances} under {self.parent or '/'} ({self.ops} ops)"


# Paddle keeps an op's layer path in Python (the static graph's name scopes), not in
# its OpDesc, so `main_program.desc.serialize_to_string()` drops them all; the bridge
# writes them into field 1001.
NO_STRUCT_NAMES = (
    "no op carries a struct name (the layer path, OpDesc field 1001), so no layer can be "
    "found: a program saved with main_program.desc.serialize_to_string() loses them, since "
    "Paddle keeps them in Python; export it with "
    "vppctl.paddle.export_program(main_program, dist_context) instead"
)


def candidates(index: ProgramIndex) -> list[LayerCandidate]:
    """Repeated-layer candidates, most forward ops first."""
    block = index.global_block
    roles = block.ops.role
    weights = Counter(s for s, r in zip(block.ops.struct, roles) if is_forward(r))
    instances: dict[tuple[str, str], set[str]] = {}
    ops: Counter[tuple[str, str]] = Counter()
    for raw, n in weights.items():
        parts = raw.decode("utf-8", "replace").strip("/").split("/")
        for d, comp in enumerate(parts):
            if not comp:
                continue
            parent = "/" + "/".join(parts[:d]) if d else ""
            key = (parent, _SUFFIX.sub("", comp))
            instances.setdefault(key, set()).add(comp)
            ops[key] += n
    found = [
        LayerCandidate(p, c, len(instances[p, c]), ops[p, c])
        for (p, c) in instances
        if len(instances[p, c]) >= 2
    ]
    found.sort(key=lambda c: (-c.ops, c.parent, c.layer_class))
    return found


def detect_layers(index: ProgramIndex, *, strict: bool = False) -> LayerSet:
    """The layers of the best candidate; ConversionError when none or ambiguous."""
    found = candidates(index)
    if not found:
        raise ConversionError(
            "found no repeated layer in the struct names (no layer class with two or more "
            "instances under one parent); pass --seg-method with the layer's class name"
        )
    best = found[0]
    if len(found) > 1 and found[1].ops == best.ops:
        listed = "; ".join(map(str, found[:4]))
        raise ConversionError(
            f"the repeated layer is ambiguous, candidates cover the same ops: {listed}; "
            "choose one with --seg-method"
        )
    try:
        return find_layers(
            index, best.regex, strict=strict, detected=True, layer_class=best.layer_class
        )
    except ConversionError as e:
        raise ConversionError(
            f"detected layer {best.layer_class} (under {best.parent or '/'}) cannot be used: "
            f"{e}; pass --seg-method to choose the layer"
        ) from None


def resolve_layers(
    index: ProgramIndex,
    seg_method: str | None = None,
    recorded: RecordedPlan | None = None,
    *,
    strict: bool = False,
) -> LayerSet:
    """The layer set: `seg_method` (the user's regex) if given, else the recorded plan's
    regex, else detection. Raises UsageError for a bad --seg-method and ConversionError
    when the layers cannot be found (a bad recorded regex included: the program's fault)."""
    if seg_method:
        compile_seg_method(seg_method)  # a bad regex is a usage error, whatever the program
    if not any(index.global_block.ops.struct):
        raise ConversionError(NO_STRUCT_NAMES)
    if seg_method:
        return find_layers(index, seg_method, strict=strict)
    if recorded is not None and recorded.seg_method:
        try:
            return find_layers(index, recorded.seg_method, strict=strict)
        except UsageError as e:
            raise ConversionError(
                f"the recorded plan's seg_method is unusable ({e}); pass --seg-method to name "
                "the layer"
            ) from None
    return detect_layers(index, strict=strict)
