"""`vppctl sample`: a GPT-like training program annotated for plain PP.

The program is shaped like what Paddle's static auto-parallel produces for a
GPT decoder stack: forward ops with layer paths (`/GPTModel/DecoderLayer_3/MLP/Linear_1/`,
Paddle's `NameStruct` naming: the first call of a class has no suffix, later
calls get `_1`, `_2`, ...), the loss-grad op, one `<type>_grad` op per forward
op in reverse order (with `forward_op_id`), `sum` ops where a variable has
several gradient contributions (`x@GRAD@RENAME@block0@k`, as Paddle's backward
names them), optional global-norm gradient clipping, one optimizer update per
parameter, and a dist attr (stage mesh, chunk 0) on every op and variable.

Generation is deterministic and fast (a 1M-op program in a few seconds). The
package reads in the order it works: `model` (the options and the forward
graph as plain tuples), `encode` (ops and variables to bytes), `stamp` (layers
formatted from templates), `sections` (the program, section by section).


- The model is built as plain tuples; each op is encoded from cached parts (its
  type and attributes, meshes, dims mappings are serialized once) joined with
  its names and ids, in protobuf's canonical field order, so parsing and
  re-serializing a sample gives the same bytes.
- Encoding every op field by field still costs ~40 µs of Python per op, so
  decoder layers are *stamped*: consecutive layers of one section (forward,
  backward, clipping, optimizer) differ only by the numbers in their names
  (`linear_12.w_0`, `DecoderLayer_3`) and their op ids, each growing by a fixed
  step per layer. Two consecutive layers encoded op by op give a bytes template
  with a `%d` or `%c` placeholder wherever they differ; the following layers are
  formatted from it in C, until a number would gain a digit or the layer's stage
  changes, and then two layers are encoded op by op again. The output is exactly
  what encoding every layer op by op gives (tests compare both, and digests).
- The serialized ops and variables are collected in large pieces and copied
  into the result piece by piece, so the result is never held twice (the peak
  is about 1.7x the output at 10,000 layers, most of the rest being the names).

Names load on first use: a command that only checks a `SampleOptions` loads no builder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vppctl._lazy import face

# The sample's option types, re-exported: their one definition is vppctl.choices.
from vppctl.choices import Layout, Optimizer

_NAMES = {"SampleOptions": "model", "build_sample": "sections", "estimate_size": "size"}
__all__ = ["Layout", "Optimizer", "SampleOptions", "build_sample", "estimate_size"]
__getattr__, __dir__ = face(__name__, _NAMES, globals())

if TYPE_CHECKING:
    from vppctl.sample.model import SampleOptions
    from vppctl.sample.sections import build_sample
    from vppctl.sample.size import estimate_size
