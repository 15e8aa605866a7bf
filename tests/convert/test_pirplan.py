"""The PIR plan (vppctl/plan/pirplan.py): what Paddle's PIR completion can take, made in
Python or read from its file (whose schema is vppctl/report/schemas/pir-plan.json), each
refusal naming why.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import jsonschema
import pytest

from vppctl.errors import ProgramFileError, UsageError
from vppctl.plan import PirPlan, paddle_layer, paddle_seg_method, program_digest, read_pir_plan

SCHEMA = json.loads(
    resources.files("vppctl.report").joinpath("schemas", "pir-plan.json").read_text()
)
NAMES = tuple(f"DecoderLayer{'_' + str(i) if i else ''}" for i in range(8))


def split(counts: list[int], names: tuple[str, ...] = NAMES) -> tuple[tuple[str, ...], ...]:
    it = iter(names)
    return tuple(tuple(next(it) for _ in range(n)) for n in counts)


# -- the plan object ----------------------------------------------------------------------


def test_a_plan_takes_empty_end_virtual_stages_and_nothing_paddle_cannot() -> None:
    for counts in (
        [2, 2, 2, 2],
        [1, 3, 3, 1],
        [0, 4, 4, 0],
        [0, 3, 5, 0],
        [5, 1, 2, 0],
        [1, 1, 1, 5],
    ):
        plan = PirPlan(2, 2, "DecoderLayer", split(counts))
        assert plan.names == NAMES
        assert plan.empty == tuple(plan.place(k) for k, n in enumerate(counts) if n == 0)
        assert [s[2] for s in plan.segments] == [vs for vs in split(counts) if vs]


# Every way a plan can be one Paddle's completion cannot take, and what is said of it.
REFUSED: dict[str, tuple[dict[str, Any], str]] = {
    "pp 1": ({"pp": 1, "virtual_stages": split([4, 4])}, "pp is 1"),
    "vpp 1": ({"vpp": 1, "virtual_stages": split([4, 4])}, "vpp is 1"),
    "vpp as text": ({"vpp": "2"}, "vpp is '2'"),
    "too few virtual stages": (
        {"virtual_stages": split([4, 4])},
        "lists 2 virtual stages, but pp*vpp = 2*2 = 4",
    ),
    "an empty middle one": (
        {"virtual_stages": split([2, 0, 3, 3])},
        "virtual stage 1 (stage 1, chunk 0) holds no layer",
    ),
    "another empty middle one": (
        {"virtual_stages": split([2, 3, 0, 3])},
        "virtual stage 2 (stage 0, chunk 1) holds no layer",
    ),
    "a layer twice": (
        {"virtual_stages": (NAMES[:2], NAMES[1:4], NAMES[4:6], NAMES[6:])},
        "layer DecoderLayer_1 is listed twice",
    ),
    "no layer": (
        {"virtual_stages": ((), (), (), ())},
        "virtual stage 1 (stage 1, chunk 0) holds no layer",
    ),
    "an empty name": (
        {"virtual_stages": split([2, 2, 2, 2], ("", *NAMES[1:]))},
        "a layer is named ''",
    ),
    "a bad regex": ({"seg_method": "Decoder("}, "is not a regular expression"),
    "no regex": ({"seg_method": ""}, "seg_method is ''"),
    "op counts for other layers": ({"layer_ops": (7,) * 7}, "lists 8 layers but op counts for 7"),
    "an op count of 0": ({"layer_ops": (7,) * 7 + (0,)}, "layer_ops are not positive op counts"),
    "a digest of another kind": ({"digest": "md5:abc"}, "digest 'md5:abc' is not sha256"),
}


@pytest.mark.parametrize("name", REFUSED)
def test_a_plan_paddle_cannot_take_is_refused_when_made(name: str) -> None:
    fields: dict[str, Any] = {
        "pp": 2,
        "vpp": 2,
        "seg_method": "DecoderLayer",
        "virtual_stages": split([2, 2, 2, 2]),
    }
    changes, said = REFUSED[name]
    with pytest.raises(UsageError, match="not a PIR plan Paddle's completion can take") as info:
        PirPlan(**{**fields, **changes})
    assert said in str(info.value)


def test_the_digest_is_of_the_layer_regex_the_names_and_the_op_counts() -> None:
    base = program_digest("DecoderLayer", NAMES, [7] * 8)
    assert base.startswith("sha256:") and len(base) == 7 + 64
    assert base == program_digest("DecoderLayer", list(NAMES), (7,) * 8)
    others = {
        program_digest("Decoder", NAMES, [7] * 8),
        program_digest("DecoderLayer", (*NAMES[:7], "DecoderLayer_9"), [7] * 8),
        program_digest("DecoderLayer", NAMES, [7] * 7 + [8]),
        program_digest("DecoderLayer", NAMES[:7], [7] * 7),
    }
    assert base not in others and len(others) == 4


def test_paddle_reads_a_layer_from_where_the_regex_matches() -> None:
    import re

    regex = re.compile("DecoderLayer", re.IGNORECASE)
    assert paddle_layer(regex, "/M/Qwen2DecoderLayer_3/Attn/") == "DecoderLayer_3"
    assert paddle_layer(regex, "/M/decoderlayer_3/") == "decoderlayer_3"
    assert paddle_layer(regex, "/M/Embedding/") is None
    structs = ["/GPTModel/DecoderLayer_1/MLP/", "/GPTModel/Embedding/"]
    assert (
        paddle_seg_method("DecoderLayer", "(?<=/)DecoderLayer(?:_\\d+)?(?=/)", structs)
        == "DecoderLayer"
    )
    # the class reads another layer than vppctl's regex on some struct name: the regex
    assert (
        paddle_seg_method("Layer", "(?<=/)Layer(?:_\\d+)?(?=/)", ["/M/NormLayer/Layer_1/"])
        != "Layer"
    )


# -- the plan file -------------------------------------------------------------------------


def test_a_plan_file_round_trips_and_matches_its_schema() -> None:
    plan = PirPlan(
        2, 2, "DecoderLayer", split([0, 4, 4, 0]), split="explicit", source="p.json",
        layer_ops=(7,) * 8, digest=program_digest("DecoderLayer", NAMES, [7] * 8),
    )  # fmt: skip
    text = plan.dumps()
    data = json.loads(text)
    jsonschema.Draft202012Validator(SCHEMA).validate(data)
    assert data == plan.to_json() and read_pir_plan(text, "p") == plan
    assert text.count("\n    {") == 4  # one line per virtual stage
    assert text == plan.dumps() and text.endswith("}\n")


def _file(**changes: Any) -> dict[str, Any]:
    data = PirPlan(2, 2, "DecoderLayer", split([2, 2, 2, 2])).to_json()
    for dotted, value in changes.items():
        where, _, key = dotted.rpartition("__")
        target = data
        for part in where.split("__") if where else ():
            target = target[int(part)] if part.isdigit() else target[part]
        if value is KeyError:
            del target[key]
        else:
            target[key] = value
    return data


# Every way a file can fail to be a plan: the file's problem, exit 3, the file named.
BAD_FILES: dict[str, tuple[Any, str]] = {
    "not JSON": ("{oops", "not JSON"),
    "a list": ([], "holds a JSON object, not list"),
    "another format": (_file(format="vppctl-plan"), "not a vppctl-pir-plan file of version 1"),
    "another version": (_file(version=2), "(format 'vppctl-pir-plan', version 2)"),
    "a missing key": (_file(seg_method=KeyError), "the plan has no 'seg_method'"),
    "an unknown key": (_file(extra=1), "the plan has an unknown key 'extra'"),
    "v placement": (_file(placement="v"), "has no V-shaped schedule"),
    "an index out of order": (
        _file(virtual_stages__1__index=3),
        "virtual stage 1 is listed as index 3",
    ),
    "another stage": (
        _file(virtual_stages__1__stage=0),
        "loop placement puts it on stage 1, chunk 0",
    ),
    "names that are not names": (
        _file(virtual_stages__0__layers=[1]),
        "virtual stage 0's layers are not a list",
    ),
    "a layer count that disagrees": (
        _file(program__layers=9),
        "its program has 9 layers, its virtual stages list 8",
    ),
    "an empty middle virtual stage": (
        _file(virtual_stages__1__layers=[], virtual_stages__0__layers=NAMES[:4], program__layers=8),
        "virtual stage 1 (stage 1, chunk 0) holds no layer",
    ),
}


@pytest.mark.parametrize("name", BAD_FILES)
def test_a_file_that_is_no_plan_is_refused_naming_it(name: str) -> None:
    data, said = BAD_FILES[name]
    text = data if isinstance(data, str) else json.dumps(data)
    with pytest.raises(ProgramFileError, match="cannot read plan.json as a PIR plan") as info:
        read_pir_plan(text.encode(), "plan.json")
    assert said in str(info.value)
