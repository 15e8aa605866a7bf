"""The PIR plan (vppctl/plan/pirplan.py) and `vppctl convert` on a PIR program, which writes it.

Without Paddle: the checked-in PIR programs Paddle 3.3.1 built (tests/data/pir_reference/)
are converted with every split vppctl makes; the plan file holds each virtual stage's
layers as the table shows them, the program's identity, and passes its schema
(vppctl/report/schemas/pir-plan.json); with Paddle's own split it is the split Paddle's
completion made of the same program. What a plan Paddle cannot take is refused, made in
Python or read from a file, each refusal naming why. Paddle building under the plan is
tests/paddle/test_pir.py's.
"""

from __future__ import annotations

import json
import lzma
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import paths
import pytest
from commandline import invoke
from pir_cases import CASES, LAYERS, PP

from vppctl import ConvertOptions, PlanOptions, convert_file, read_program
from vppctl.errors import ProgramFileError, UsageError
from vppctl.plan import PirPlan, paddle_layer, paddle_seg_method, program_digest, read_pir_plan
from vppctl.verify import VerifyOptions, verify_program

SCHEMA = json.loads(
    resources.files("vppctl.report").joinpath("schemas", "pir-plan.json").read_text()
)
NAMES = tuple(f"DecoderLayer{'_' + str(i) if i else ''}" for i in range(8))


def split(counts: list[int], names: tuple[str, ...] = NAMES) -> tuple[tuple[str, ...], ...]:
    it = iter(names)
    return tuple(tuple(next(it) for _ in range(n)) for n in counts)


def plain(case: str, tmp: Path, kind: str = "plain") -> Path:
    path = tmp / f"{case}_{kind}.json"
    path.write_bytes(lzma.decompress((paths.PIR_REFERENCE / f"{case}_{kind}.json.xz").read_bytes()))
    return path


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("pir-plain")
    return {case: plain(case, tmp) for case in CASES}


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
def test_a_file_that_is_no_plan_is_refused_naming_it(name: str, tmp_path: Path) -> None:
    data, said = BAD_FILES[name]
    text = data if isinstance(data, str) else json.dumps(data)
    with pytest.raises(ProgramFileError, match="cannot read plan.json as a PIR plan") as info:
        read_pir_plan(text.encode(), "plan.json")
    assert said in str(info.value)
    path = tmp_path / "plan.json"
    path.write_text(text)
    r = invoke("verify", plain("gpt_pp2_v2", tmp_path), "--plan", path, exit_code=3)
    assert r.stderr.startswith("Error: cannot read") and said in r.stderr


# -- convert on a PIR program ---------------------------------------------------------------

SPLITS: dict[str, list[str]] = {
    "uniform": [],
    "keep": ["--split", "keep"],
    "balanced": ["--split", "balanced"],
    "balanced by flops": ["--split", "balanced", "--cost", "flops"],
}


@pytest.mark.parametrize("how", SPLITS)
@pytest.mark.parametrize("case", CASES)
def test_convert_writes_the_plan_of_every_split(
    programs: dict[str, Path], tmp_path: Path, case: str, how: str
) -> None:
    out = tmp_path / "plan.json"
    args = ["convert", programs[case], "--vpp", "2", *SPLITS[how], "-o", out]
    if how == "uniform" and LAYERS[case] % (2 * PP[case]):
        invoke(*args, exit_code=4)
        assert not out.exists()
        return
    r = invoke(*args, "--json")
    shown = json.loads(r.stdout)
    jsonschema.Draft202012Validator(SCHEMA).validate(json.loads(out.read_text()))
    plan = read_pir_plan(out.read_bytes(), str(out))
    assert [list(vs) for vs in plan.virtual_stages] == [s["layers"] for s in shown["segments"]]
    assert (plan.pp, plan.vpp, plan.source) == (PP[case], 2, str(programs[case]))
    assert len(plan.names) == LAYERS[case] and plan.split.startswith(shown["split"])
    assert plan.layer_ops is not None and plan.digest == program_digest(
        plan.seg_method, plan.names, plan.layer_ops
    )
    assert (
        plan.seg_method == {"gpt": "DecoderLayer", "llama": "LlamaDecoderLayer"}[case.split("_")[0]]
    )
    assert shown["output"] == str(out) and shown["bytes_written"] == len(out.read_bytes())
    again = tmp_path / "again.json"
    invoke("convert", programs[case], "--vpp", "2", *SPLITS[how], "-o", again, "-q")
    assert again.read_bytes() == out.read_bytes()  # deterministic


def test_convert_s_table_says_what_was_written(programs: dict[str, Path], tmp_path: Path) -> None:
    r = invoke("convert", programs["gpt_keep_pp2_v2"], "--vpp", "2", "-o", tmp_path / "p.json")
    assert "a PIR program: written is the plan for vppctl.paddle.pir_plan" in r.stdout
    # the parameters it moves are Paddle's build's to move: no --moves map is offered
    assert "move to another (stage, chunk); Paddle's build moves them" in r.stdout
    assert r.stderr.startswith(f"wrote {tmp_path / 'p.json'} (")
    legacy = invoke("convert", paths.SAMPLE, "--vpp", "2", "-o", tmp_path / "s.pb")
    assert r.stdout.splitlines()[1].split() == legacy.stdout.splitlines()[1].split()  # header


@pytest.mark.parametrize("case", CASES)
def test_with_paddle_s_split_the_plan_is_the_split_paddle_made(
    programs: dict[str, Path], tmp_path: Path, case: str
) -> None:
    """`--split keep` on Paddle's plain program gives, per virtual stage, the layers
    Paddle's own completion put there (read back from its completed program)."""
    out = tmp_path / "plan.json"
    invoke("convert", programs[case], "--vpp", "2", "--split", "keep", "-o", out, "-q")
    plan = read_pir_plan(out.read_bytes(), str(out))
    completed = read_program(plain(case, tmp_path, "paddlevpp"))
    report = verify_program(completed, VerifyOptions(plan=plan))
    assert {v.rule for v in report.violations} == {"V009"}  # Paddle's own, and no V012
    assert report.layers is not None and report.layers.names == plan.names


def test_the_plan_is_the_result_s_too(programs: dict[str, Path], tmp_path: Path) -> None:
    opts = ConvertOptions(plan=PlanOptions(vpp=2, layers_per_chunk=(1, 3, 3, 1)))
    outcome = convert_file(programs["gpt_pp2_v2"], tmp_path / "p.json", opts)
    plan = outcome.result.pir_plan
    assert plan is not None and [len(v) for v in plan.virtual_stages] == [1, 3, 3, 1]
    assert (tmp_path / "p.json").read_text() == plan.dumps()
    default = convert_file(programs["gpt_pp2_v2"], None, opts)
    assert default.output == str(programs["gpt_pp2_v2"]).replace(".json", ".vpp.json")


# What convert refuses of a PIR program: the exit code, what the message says.
PIR_REFUSALS: dict[str, tuple[list[str], int, str]] = {
    "v placement": (["--vpp", "2", "--placement", "v"], 4, "has no V-shaped schedule"),
    "vpp 1": (["--vpp", "1", "--split", "keep"], 4, "pp 2, vpp 1"),
    "in place": (["--vpp", "2", "--in-place"], 2, "--in-place (ConvertOptions.in_place)"),
    "no call stacks": (["--vpp", "2", "--strip-callstack"], 2, "--strip-callstack"),
    "parameter moves": (["--vpp", "2", "--moves", "MOVES"], 2, "--moves"),  # in tmp_path
}


@pytest.mark.parametrize("name", PIR_REFUSALS)
def test_what_paddle_s_completion_cannot_take_is_refused(
    programs: dict[str, Path], tmp_path: Path, name: str
) -> None:
    args, code, said = PIR_REFUSALS[name]
    args = [str(tmp_path / "moves.json") if a == "MOVES" else a for a in args]
    src = tmp_path / "prog.json"
    src.write_bytes(programs["gpt_pp2_v2"].read_bytes())
    out = tmp_path / "plan.json"
    extra = [] if "--in-place" in args else ["-o", out]
    r = invoke("convert", src, *args, *extra, exit_code=code)
    assert said in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prog.json"]  # nothing written
    assert src.read_bytes() == programs["gpt_pp2_v2"].read_bytes()


def test_a_program_paddle_completed_is_refused(tmp_path: Path) -> None:
    done = plain("gpt_pp2_v2", tmp_path, "paddlevpp")
    r = invoke(
        "convert", done, "--vpp", "2", "--split", "keep", "-o", tmp_path / "p.json", exit_code=4
    )
    assert "already interleave" in r.stderr and not (tmp_path / "p.json").exists()
