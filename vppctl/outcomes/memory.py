"""The JSON of a stage's bytes: the one shape `convert`, `simulate` and `plan` give each
stage's memory in (null keys where there is no program to size)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the planner loads on use: a plain convert never sizes memory
    from vppctl.planner import StageMemory


def stage_memory_json(s: StageMemory) -> dict[str, Any]:
    """One stage's bytes (the shape `convert`, `simulate` and `plan` share in their JSON)."""
    return {
        "params_bytes": s.params_bytes,
        "grads_bytes": s.grads_bytes,
        "optimizer_bytes": s.optimizer_bytes,
        "peak_activation_bytes": s.peak_activation_bytes,
        "peak_bytes": s.peak_bytes,
        "over_limit": s.over_limit,
        "chunks": [
            {
                "chunk": c.chunk,
                "virtual_stage": c.virtual_stage,
                "params_bytes": c.params_bytes,
                "grads_bytes": c.grads_bytes,
                "optimizer_bytes": c.optimizer_bytes,
                "activation_bytes_per_micro_batch": c.activation_bytes_per_micro_batch,
                "peak_in_flight": c.peak_in_flight,
                "activation_bytes": c.activation_bytes,
            }
            for c in s.chunks
        ],
    }


# A stage's memory keys in the JSON, null when there is no program to size.
NO_STAGE_MEMORY: dict[str, Any] = dict.fromkeys(
    (
        "params_bytes",
        "grads_bytes",
        "optimizer_bytes",
        "peak_activation_bytes",
        "peak_bytes",
        "over_limit",
        "chunks",
    )
)
