"""PIR programs Paddle 3.3.1 built (tests/data/pir_reference/): inspect, simulate and verify read
them, vppctl's plan equals Paddle's own PIR VPP completion op by op, and the verifier's
rules hold on Paddle's completion but for the one place Paddle breaks one (V009). What
`plan` says of them (Paddle's PIR strategy) is tests/planner/test_pir.py's.

Six kinds of job, each as the plain-PP input and as Paddle's VPP completion (vpp 2):
GPT at pp 2 and pp 4, GPT with 7 + 5 layers per stage, Llama with TP 2, Llama with AMP
(bfloat16 O1) at pp 4, Llama with every layer recomputed. tests/paddle/
test_pir_live.py builds them again with Paddle.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from commandline import invoke
from pir_cases import CASES, LAYERS, PARITY, PP, RECOMPUTED, parity, program, reference

from vppctl.program import Program, op_slots, parse_program
from vppctl.summary import summarize
from vppctl.verify import PIR_RULES, verify_program


def json_file(tmp_path: Path, case: str, kind: str) -> Path:
    path = tmp_path / f"{case}_{kind}.json"
    path.write_bytes(reference(case, kind))
    return path


# -- inspect -----------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_inspect_finds_the_stages_layers_and_chunks(case: str) -> None:
    for kind, layout, chunks in (
        ("plain", "plain", ()),
        ("paddlevpp", "interleaved", (0, 1)),
    ):
        s = summarize(program(case, kind))
        assert s.pir is not None and s.pir.version == 4
        assert len(s.stage_meshes) == PP[case] and s.layers is not None
        assert len(s.layers) == LAYERS[case] and s.layers.detected
        assert (s.layout, s.chunks) == (layout, chunks)
        assert s.ops["forward"] and s.ops["backward"] and s.ops["optimizer"]
        assert s.unplaced_ops == 0


def test_inspect_cli_says_where_the_program_came_from(tmp_path: Path) -> None:
    path = json_file(tmp_path, "gpt_pp2_v2", "paddlevpp")
    r = invoke("inspect", str(path))
    assert "read from PIR (Paddle 3.x JSON, version 4)" in r.stdout
    assert "6 dist_op.reshard" in r.stdout.replace("\n", " ")
    r = invoke("inspect", str(path), "--json")
    folded = json.loads(r.stdout)["pir"]["folded"]
    assert folded["builtin.parameter"] == 52 and folded["dist_op.reshard"] == 6


# -- verify: Paddle's own PIR VPP completion ---------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_paddles_completion_keeps_every_rule_but_one_sum(case: str) -> None:
    """Paddle's PIR completion breaks V009 once per chunk boundary of stage 0 (vpp - 1 times:
    once at vpp 2; tests/paddle/test_pir_live.py counts them at vpp 3 and 4): the sum of the
    gradient parts of the hidden state a stage's chunk 1 reads from its previous stage's
    chunk 0 (the first layer of chunk 1 on stage 0) sits in chunk 0, the chunk of the
    reshard it differentiates, while the ops that make its parts are in chunk 1 (the
    finding docs/paddle.md gives)."""
    report = verify_program(program(case, "paddlevpp"))
    assert report.pir and (report.pp, report.vpp) == (PP[case], 2)
    (v,) = report.violations
    assert (v.rule, v.cause.value, v.type) == ("V009", "sum_misplaced", "pd_op.add_n")
    assert "chunk 0 but its nearest earlier producer" in v.message and "chunk 1" in v.message


def test_the_in_place_sum_of_gradient_parts_is_judged_as_a_sum() -> None:
    """Paddle's PIR backward may add gradient parts up with the in-place `pd_op.add_n_`
    (ir_backward.py places it as it places `pd_op.add_n`): the same completion with every
    add_n made in place breaks V009 at the same sum, and nothing else."""
    doc = reference("gpt_pp2_v2", "paddlevpp").decode()
    assert doc.count('"1.add_n"') == 8
    in_place = doc.replace('"1.add_n"', '"1.add_n_"').encode()
    report = verify_program(parse_program(in_place, source="in_place.json"))
    (v,) = report.violations
    assert (v.rule, v.cause.value, v.type) == ("V009", "sum_misplaced", "pd_op.add_n_")


def test_verify_cli_notes_the_rules_that_apply_in_part(tmp_path: Path) -> None:
    path = json_file(tmp_path, "gpt_pp2_v2", "paddlevpp")
    r = invoke("verify", str(path), exit_code=1)
    assert "read from PIR: V001, V011, V017, V018 apply in part" in r.stdout.replace("\n", " ")
    r = invoke("verify", str(path), "--json", exit_code=1)
    assert json.loads(r.stdout)["pir"] is True
    r = invoke("verify", "--rules")
    assert all(rule in r.stdout for rule in PIR_RULES)


def test_verify_of_a_plain_pir_program_points_to_paddles_completion(tmp_path: Path) -> None:
    """A PIR program not yet converted: the note names Paddle's completion (its own split,
    or vppctl's plan under vppctl.paddle.pir_plan), not a converted program to verify."""
    path = json_file(tmp_path, "gpt_pp2_v2", "plain")
    r = invoke("verify", str(path), "--vpp", "2", exit_code=1)
    said = r.stdout.replace("\n", " ")
    assert "needs Paddle's PIR completion (vpp_degree > 1) first" in said, said
    assert "with the plan `vppctl convert` writes (vppctl.paddle.pir_plan)" in said, said
    assert "`vppctl convert` first" not in said  # a legacy program's advice: no PIR is written


@pytest.mark.parametrize("case", CASES)
def test_a_plain_pir_program_is_checked_as_paddle_runs_it(tmp_path: Path, case: str) -> None:
    """Was: "pp N x vpp 0", and "chunk -1" in each message. Paddle's plain pipeline runs
    each stage's ops as one chunk: so does verify, and the program keeps every rule."""
    r = invoke("verify", str(json_file(tmp_path, case, "plain")), exit_code=0)
    assert r.stdout.startswith(f"valid: pp {PP[case]} x vpp 1, loop placement"), r.stdout
    assert "chunk -1" not in r.stdout


def _seeded(case: str, edit: str) -> Program:
    """Paddle's completion with one fault: `edit` "layer" moves one op of the fifth layer
    (chunk 1) to chunk 0; "grad" moves the first matmul_grad, "copy" the first recompute
    copy (a backward op with a layer path), to the other chunk."""
    doc = json.loads(reference(case, "paddlevpp"))
    ops = doc["program"]["regions"][0]["blocks"][0]["ops"]

    def attrs(op: dict[str, object]) -> dict[str, object]:
        return {a["N"]: a["AT"]["D"] for a in op.get("A", []) if isinstance(a, dict)}

    if edit == "layer":
        op = next(o for o in ops if "DecoderLayer_4/" in str(attrs(o).get("struct_name")))
    elif edit == "grad":
        op = next(o for o in ops if o["#"] == "1.matmul_grad")
    else:
        op = next(o for o in ops if attrs(o).get("op_role") == 1 and attrs(o).get("struct_name"))
    dist = next(a for a in op["A"] if a["N"] == "op_dist_attr")["AT"]["D"]
    dist[3] = 1 - dist[3]
    return parse_program(json.dumps(doc).encode(), source="seeded.json")


@pytest.mark.parametrize(
    ("case", "edit", "rule"),
    [
        ("gpt_pp2_v2", "layer", "V004"),
        ("gpt_pp2_v2", "grad", "V008"),
        ("llama_rc_pp2_v2", "copy", "V021"),  # a recompute copy, read as Paddle's legacy one
    ],
)
def test_a_seeded_fault_in_paddles_completion_is_found(case: str, edit: str, rule: str) -> None:
    found = {v.rule for v in verify_program(_seeded(case, edit)).violations}
    assert rule in found


# -- parity: vppctl's plan is Paddle's completion, op by op -------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_vppctls_plan_is_paddles_pir_completion_op_by_op(case: str) -> None:
    """The plan Paddle's completion makes (the PIR strategy: split keep, loop placement)
    puts every layer op where Paddle's complete_chunk_id puts it, every grad op of one where
    Paddle's backward puts it (its forward op's chunk), and every recompute copy where
    Paddle's recompute pass puts it."""
    result = parity(program(case, "plain"), program(case, "paddlevpp"))
    assert not result.differ, result.differ[:3]
    assert (result.forward, result.backward) == PARITY[case]
    assert result.recomputed == RECOMPUTED.get(case, 0)


def test_a_split_paddle_does_not_make_differs_from_its_completion() -> None:
    """Against a false positive: with 7 + 5 layers per stage, the uniform split (3 layers a
    chunk) moves layers 3, 6 and 9 to other chunks than Paddle's completion gives them."""
    case = "gpt_keep_pp2_v2"
    result = parity(program(case, "plain"), program(case, "paddlevpp"), split="uniform")
    layers = {key[0].split(b"/")[2] for key, _, _ in result.differ}
    assert layers == {b"DecoderLayer_3", b"DecoderLayer_6", b"DecoderLayer_9"}
    assert len(result.differ) == 2 * 3 * 7  # 7 forward ops a layer, and their grad ops


# -- names the optimizer agrees with, memory, simulate and plan ---------------------------------


@pytest.mark.parametrize("case", CASES)
def test_every_update_reads_its_parameters_gradient_by_name(case: str) -> None:
    """The gradient names the reader recovers agree with Paddle's own wiring: each adamw_
    reads its parameter and, as its second operand, the value named P@GRAD."""
    prog = program(case, "paddlevpp")
    from vppctl.engine import build_index

    block = build_index(prog).global_block
    updates = [op for op in range(block.n_ops) if block.ops.type[op] == b"pd_op.adamw_"]
    assert updates
    for op in updates:
        slots = op_slots(prog.blocks[0], op)
        assert slots["in1"] == [slots["Param"][0] + b"@GRAD"], slots


def test_simulate_runs_paddles_completion_as_it_is_placed(tmp_path: Path) -> None:
    path = json_file(tmp_path, "gpt_keep_pp2_v2", "paddlevpp")
    args = ["simulate", str(path), "--vpp", "2", "--split", "keep", "-m", "8", "--json"]
    r = invoke(*args)
    out = json.loads(r.stdout)
    assert out["plan"]["layers_per_segment"] == [4, 3, 3, 2]  # as Paddle dealt them
    for stage in out["results"][0]["per_stage"]:
        assert stage["grads_bytes"] == stage["params_bytes"] > 0  # every P@GRAD, float32


@pytest.mark.parametrize("case", CASES)
def test_simulate_reads_vpp_and_split_from_paddles_chunk_ids(tmp_path: Path, case: str) -> None:
    """Was: `simulate` on Paddle's completion asked for --vpp, although `verify` reads vpp
    from the same chunk ids. Now the plan is the chunk ids' own: Paddle's split, keep."""
    path = json_file(tmp_path, case, "paddlevpp")
    plan = json.loads(invoke("simulate", str(path), "-m", "8", "--json").stdout)["plan"]
    asked = ["simulate", str(path), "--vpp", "2", "--split", "keep", "-m", "8", "--json"]
    keep = json.loads(invoke(*asked).stdout)["plan"]
    assert (plan["pp"], plan["vpp"], plan["split"]) == (PP[case], 2, "keep")
    assert plan["layers_per_segment"] == keep["layers_per_segment"]
    assert sum(plan["layers_per_segment"]) == LAYERS[case]
    plain = json_file(tmp_path, case, "plain")
    r = invoke("simulate", str(plain), "-m", "8", exit_code=2)
    assert "--vpp is required" in r.stderr and "no chunk ids past 0" in r.stderr


def test_the_rules_that_apply_in_part_are_rules() -> None:
    from vppctl.verify import RULES

    assert set(PIR_RULES) <= set(RULES)
