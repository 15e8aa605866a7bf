"""The fuzzer's PIR half: mutated PIR programs (JSON) for `fuzzing.run_round`.

`pir_mutant(seed, n)` rebuilds input n of PIR round `seed`: a base program with one to
three mutations, or now and then an input of a hostile class. The bases are small
programs built in code (tests/support/pir_json.py) and real ones Paddle built: in the CI
round the two smallest reference programs of tests/data/pir_reference/ (GPT at pp 2,
plain and completed), in the long round (VPPCTL_SLOW=1) every reference program and every
program of the generated matrix, tests/data/pir_matrix/, when it is there.

The mutations are structural (keys, values, ops, ids, chunk ids, meshes, the header,
attributes) or aimed at what Paddle writes and a hostile writer may:

* `null slot`: Paddle's NULL (`{"#": "NULL"}`), JSON's null or nothing in one dist-attr
  slot, of a kind drawn from every kind `pir_json.dist_slots` lists for the program;
* `null string`: NULL or null in place of one string (a name, a type tag, a layout);
* `surrogate name` and `non-character name`: a lone surrogate (no UTF-8 holds one) or a
  non-character (U+FFFE, U+FDD0, U+10FFFF, ...) put into one name: an op type, a struct
  name, a data or parameter name, a mesh dim name.
"""

from __future__ import annotations

import gzip
import json
import lzma
import os
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import paths
from fuzzing import EDGE_INTS, ODD_STRINGS, ROLES, Base, mutate_bytes
from pir_json import NULL, OPS, dist_slots, set_at, training

SMALL_REAL = ("gpt_pp2_v2_plain", "gpt_pp2_v2_paddlevpp")  # the CI round's real programs
MATRIX = paths.DATA / "pir_matrix"  # brief 31b's generated matrix, once it lands
SURROGATES = ("\ud800", "\udbff", "\udc00", "\udfff")
NON_CHARACTERS = ("\ufffe", "\uffff", "\ufdd0", "\ufdef", "\U0001fffe", "\U0010ffff")


def _decompressed(path: Path) -> bytes:
    data = path.read_bytes()
    if path.suffix == ".xz":
        return lzma.decompress(data)
    if path.suffix == ".gz":
        return gzip.decompress(data)
    return data


def real_programs(every: bool) -> list[Path]:
    """The real programs the rounds mutate: the CI round's two, or `every` one (the
    reference programs, then the matrix's)."""
    reference = sorted(paths.PIR_REFERENCE.glob("*.json.xz"))
    if not every:
        return [p for p in reference if p.name.split(".")[0] in SMALL_REAL]
    matrix = sorted(p for p in MATRIX.rglob("*.json*") if p.suffix in (".json", ".xz", ".gz"))
    return reference + matrix


def pir_bases(every: bool) -> list[Base]:
    """The small programs built in code (drawn most: they cost milliseconds an input) and
    the real ones (about 0.7 MB of JSON each, a tenth of a second an input)."""
    bases = [
        Base("pir_plain", training([0, 1]).bytes(), weight=8, pir=True),
        Base("pir_completed", training([0, 1, 0, 1], [0, 0, 1, 1]).bytes(), weight=8, pir=True),
    ]
    real = real_programs(every)
    weight = 2 if not every else 1
    for path in real:
        name = "pir:" + path.name.split(".")[0]
        bases.append(Base(name, _decompressed(path), weight=weight, pir=True))
    return bases


_PIR_BASES: list[Base] | None = None
ODD_JSON: tuple[object, ...] = (
    None, True, 0, -1, 2**31, 2**64, -(2**63) - 1, 1.5, "", "x", "1.matmul", "p", [], [[]],
    {}, {"%": 0}, {"#": "NULL"}, [[1], [0], ["x"]], "dist_op.reshard", "0.combine",
)  # fmt: skip
Doc = dict[str, Any]


def _nodes(doc: object, path: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Paths to every container node of a decoded JSON document."""
    out = [path]
    if isinstance(doc, dict):
        for k, v in doc.items():
            if isinstance(v, (dict, list)):
                out += _nodes(v, (*path, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            if isinstance(v, (dict, list)):
                out += _nodes(v, (*path, i))
    return out


def _strings(doc: object, path: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Paths to every string value (not key) of a decoded JSON document."""
    if isinstance(doc, str):
        return [path]
    items = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    )
    out: list[tuple[object, ...]] = []
    for k, v in items:
        out += _strings(v, (*path, k))
    return out


def _at(doc: object, path: tuple[object, ...]) -> Any:
    for k in path:
        doc = doc[k]  # type: ignore[index]
    return doc


def _ops(doc: Doc) -> list[Any]:
    try:  # an earlier mutation may have broken the path to the ops
        ops = _at(doc, OPS)
    except (KeyError, IndexError, TypeError):
        return []
    return ops if isinstance(ops, list) else []


def name_slots(doc: Doc) -> list[tuple[str, tuple[object, ...]]]:
    """(kind, path) of every name of block 0's ops: op types, struct names, data and
    parameter names, the dim names of each op's mesh."""
    out: list[tuple[str, tuple[object, ...]]] = []
    for i, op in enumerate(_ops(doc)):
        if not isinstance(op, dict):
            continue
        at = (*OPS, i)
        if isinstance(op.get("#"), str):
            out.append(("op type", (*at, "#")))
        attrs = op.get("A")
        if not isinstance(attrs, list):
            continue
        if op.get("#") == "p" and len(attrs) == 4 and isinstance(attrs[3], str):
            out.append(("parameter name", (*at, "A", 3)))
            continue
        for k, a in enumerate(attrs):
            if not isinstance(a, dict) or not isinstance(a.get("AT"), dict):
                continue
            data, where = a["AT"].get("D"), (*at, "A", k, "AT", "D")
            if a.get("N") in ("struct_name", "name") and isinstance(data, str):
                out.append((f"{a['N']}", where))
            elif a.get("N") == "op_dist_attr" and isinstance(data, list) and data:
                mesh = data[0]
                dims = mesh.get("D") if isinstance(mesh, dict) else None
                if isinstance(dims, list) and len(dims) == 3 and isinstance(dims[2], list):
                    for d, dim in enumerate(dims[2]):
                        if isinstance(dim, str):
                            out.append(("mesh dim name", (*where, 0, "D", 2, d)))
    return out


def _null_slot(rng: random.Random, doc: Doc) -> str:
    """NULL, null or nothing in one dist-attr slot, its kind drawn first (so that each kind
    is as likely, however many slots of it there are)."""
    slots = dist_slots(doc) if _ops(doc) else []
    if not slots:
        return "pir: null slot (none)"
    kinds = sorted({kind for kind, _ in slots})
    kind = rng.choice(kinds)
    path = rng.choice([p for k, p in slots if k == kind])
    how = rng.choice(("NULL", "null", "none"))
    parent = _at(doc, path[:-1])
    if how == "none" and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        set_at(doc, path, None if how == "null" else dict(NULL))
    return f"pir: null slot ({kind}: {how})"


def _null_string(rng: random.Random, doc: Doc) -> str:
    strings = _strings(doc)
    if not strings:
        return "pir: null string (none)"
    path = rng.choice(strings)
    null = rng.choice((None, NULL))
    set_at(doc, path, dict(null) if null else None)
    return f"pir: null string ({'NULL' if null else 'null'})"


def _odd_name(rng: random.Random, doc: Doc, chars: tuple[str, ...], what: str) -> str:
    slots = name_slots(doc)
    if not slots:
        return f"pir: {what} (none)"
    kind, path = rng.choice(slots)
    name = _at(doc, path)
    at = rng.randrange(len(name) + 1)
    set_at(doc, path, name[:at] + rng.choice(chars) + name[at:])
    return f"pir: {what} ({kind})"


AIMED: dict[str, Callable[[random.Random, Doc], str]] = {
    "null slot": _null_slot,
    "null string": _null_string,
    "surrogate name": lambda rng, doc: _odd_name(rng, doc, SURROGATES, "surrogate name"),
    "non-character name": lambda rng, doc: _odd_name(
        rng, doc, NON_CHARACTERS, "non-character name"
    ),
}


def mutate_json(rng: random.Random, doc: Doc) -> str:
    """One structural mutation of a PIR document, in place; what it was."""
    ops = _ops(doc)
    kinds = ("key", "value", "op", "op", "id", "chunk", "mesh", "header", "attr", "attr", "attr")
    kind = rng.choice(kinds)
    if kind == "attr" and ops and isinstance(op := rng.choice(ops), dict):
        return _mutate_attr(rng, op)
    if kind == "op" and ops:
        how = rng.choice(("delete", "duplicate", "swap", "move"))
        i, j = rng.randrange(len(ops)), rng.randrange(len(ops))
        if how == "delete":
            del ops[i]
        elif how == "duplicate":
            ops.insert(j, json.loads(json.dumps(ops[i])))
        elif how == "swap":
            ops[i], ops[j] = ops[j], ops[i]
        else:
            ops.insert(j, ops.pop(i))
        return f"json: op {how}"
    if kind == "header" and isinstance(doc.get("base_code"), dict):
        field_ = rng.choice(("magic", "version", "trainable"))
        doc["base_code"][field_] = rng.choice((*ODD_JSON, 4, 3, 5))
        return f"json: header {field_}"
    if kind in ("id", "chunk", "mesh"):
        text = json.dumps(doc)
        pattern = {"id": '"%": ', "chunk": "]], ", "mesh": '"D": [['}[kind]
        at = [m.start() for m in re.finditer(re.escape(pattern), text)]
        if at:
            k = rng.choice(at) + len(pattern)
            new = str(rng.choice((*EDGE_INTS, 5, 9999)))
            end = k
            while end < len(text) and (text[end].isdigit() or text[end] == "-"):
                end += 1
            if end > k:
                doc.clear()
                doc.update(json.loads(text[:k] + new + text[end:]))
        return f"json: {kind}"
    path = rng.choice(_nodes(doc))
    node = _at(doc, path)
    if isinstance(node, dict) and node:
        key = rng.choice(sorted(node))
        if kind == "key":
            del node[key]
        else:
            node[key] = rng.choice(ODD_JSON)
    elif isinstance(node, list) and node:
        i = rng.randrange(len(node))
        if kind == "key":
            del node[i]
        else:
            node[i] = rng.choice(ODD_JSON)
    return f"json: {kind}"


def _mutate_attr(rng: random.Random, op: dict[str, Any]) -> str:
    """An op's struct name, role, chunk id or mesh set to an odd but well-formed value."""
    listed = op.get("A")
    attrs = [a for a in listed if isinstance(a, dict)] if isinstance(listed, list) else []
    found = {a.get("N"): a for a in attrs if isinstance(a.get("AT"), dict)}
    name = rng.choice(("struct_name", "op_role", "op_dist_attr"))
    a = found.get(name)
    if a is None or (name == "op_dist_attr" and not _dist_list(a)):
        return "json: attr (none)"
    if name == "struct_name":
        a["AT"]["D"] = rng.choice(ODD_STRINGS)
    elif name == "op_role":
        a["AT"]["D"] = rng.choice(ROLES)
    else:
        dist = a["AT"]["D"]
        if rng.random() < 0.5:
            dist[3] = rng.choice((-1, 0, 1, 2, 3, 4095))
        else:
            ids = rng.choice(([0], [1], [2], [0, 1], [1, 0], [5], [0, 0], []))
            dist[0] = {"#": "4.a_process_mesh", "D": [[len(ids)], ids, ["x"]]}
    return f"json: attr {name}"


def _dist_list(a: dict[str, Any]) -> bool:
    dist = a["AT"].get("D")
    return isinstance(dist, list) and len(dist) == 4


VERSION = re.compile(rb'"version": ?4')
PIR_HOSTILE: dict[str, Callable[[random.Random, bytes], bytes]] = {
    "deep": lambda rng, d: d.replace(b'"ops":[', b'"ops":[' + b"[" * rng.randrange(900, 5000), 1),
    "huge_number": lambda rng, d: VERSION.sub(b'"version":' + b"9" * 5000, d, count=1),
    "cut": lambda rng, d: d[: rng.randrange(len(d))],
    "nested_object": lambda rng, d: b'{"base_code":' + b'{"a":' * 3000 + b"1" + b"}" * 3000 + b"}",
}
HOSTILE_SHARE = 0.1  # of the inputs
AIMED_SHARE = 0.5  # of the JSON mutations: aimed at a slot or a name


def pir_mutant(seed: int, n: int) -> tuple[Base, bytes, list[str]]:
    """Input n of PIR round `seed` (see the module docstring)."""
    global _PIR_BASES
    if _PIR_BASES is None:
        _PIR_BASES = pir_bases(every=os.environ.get("VPPCTL_SLOW") == "1")
    rng = random.Random(f"pir:{seed}:{n}")
    base = rng.choices(_PIR_BASES, weights=[b.weight for b in _PIR_BASES])[0]
    r = rng.random()
    if r < HOSTILE_SHARE:
        kind = rng.choice(sorted(PIR_HOSTILE))
        return base, PIR_HOSTILE[kind](rng, base.data), [f"hostile {kind}"]
    if r < 0.8:
        doc = json.loads(base.data)
        done = []
        for _ in range(rng.choice((1, 1, 2, 3))):
            if rng.random() < AIMED_SHARE:
                done.append(AIMED[rng.choice(sorted(AIMED))](rng, doc))
            else:
                done.append(mutate_json(rng, doc))
        return base, json.dumps(doc, separators=(",", ":")).encode(), done
    data, what = mutate_bytes(rng, base.data)
    return base, data, [what]
