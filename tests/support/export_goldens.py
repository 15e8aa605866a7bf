"""Write tests/data/layouts/exports.json: splits as torchtitan's and DeepSpeed's code give them.

Not collected by pytest; opt-in, in the venv of tests/support/layout_goldens.py (torch,
numpy), with an unzipped torchtitan 0.3.0 wheel and an unpacked deepspeed 0.19.8 sdist:

    /tmp/ref/bin/python tests/support/export_goldens.py --torchtitan TT_DIR --deepspeed DS_DIR

`tests/planner/test_launch.py` checks vppctl's exports (`vppctl/planner/launch.py`) against
every case.

The functions are taken from the downloaded packages (torchtitan 0.3.0 wheel, deepspeed 0.19.8
sdist) by compiling just their definitions out of the source files with ``ast`` and running
them: importing either package would pull in dependencies not installed here (DeepSpeed's
ops, torchtitan's config stack). torchtitan's stage-to-rank mapping needs
``get_schedule_class`` and two classes from torch.distributed.pipelining (installed).
Writes export_goldens.json.
"""

from __future__ import annotations

import argparse
import ast
import json
import pathlib
import sys


def load_functions(path: pathlib.Path, names: list[str], namespace: dict) -> dict:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    picked = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    missing = set(names) - {n.name for n in picked}
    if missing:
        raise SystemExit(f"{path}: no function {sorted(missing)}")
    module = ast.Module(body=picked, type_ignores=[])
    exec(compile(module, str(path), "exec"), namespace)
    return namespace


def version_of(root: pathlib.Path, dist: str) -> str:
    for meta in list(root.glob(f"{dist}-*.dist-info/METADATA")) + list(root.glob("PKG-INFO")):
        for line in meta.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--torchtitan", type=pathlib.Path, required=True, help="unzipped torchtitan wheel"
    )
    ap.add_argument(
        "--deepspeed", type=pathlib.Path, required=True, help="unpacked deepspeed sdist"
    )
    default = pathlib.Path(__file__).resolve().parents[1] / "data" / "layouts" / "exports.json"
    ap.add_argument("-o", "--output", default=str(default))
    args = ap.parse_args()

    import math

    import numpy
    import torch
    from torch.distributed.pipelining.schedules import (
        ScheduleDualPipeV,
        ScheduleZBVZeroBubble,
        get_schedule_class,
    )

    tt = load_functions(
        args.torchtitan / "torchtitan/distributed/pipeline_parallel.py",
        ["_generate_llm_fqn_per_model_part", "_get_pp_rank_to_stage_indices_mapping"],
        {
            "math": math,
            "get_schedule_class": get_schedule_class,
            "ScheduleZBVZeroBubble": ScheduleZBVZeroBubble,
            "ScheduleDualPipeV": ScheduleDualPipeV,
        },
    )
    ds = load_functions(
        args.deepspeed / "deepspeed/runtime/utils.py",
        ["partition_uniform", "partition_balanced"],
        {"numpy": numpy},
    )

    fqn_cases = []
    for num_stages, num_layers, iw, ow in [
        (1, 4, 1, 1),
        (2, 8, 1, 1),
        (4, 8, 1, 1),
        (4, 16, 1, 1),
        (8, 16, 1, 1),
        (4, 30, 1, 1),
        (8, 32, 2, 2),
        (6, 22, 1, 3),
        (16, 61, 1, 1),
        (3, 7, 2, 1),
    ]:
        try:
            got = tt["_generate_llm_fqn_per_model_part"](num_stages, num_layers, iw, ow)
            fqn_cases.append(
                {
                    "num_stages": num_stages,
                    "num_layers": num_layers,
                    "input_weight": iw,
                    "output_weight": ow,
                    "fqns": got,
                }
            )
        except ValueError as e:
            fqn_cases.append(
                {
                    "num_stages": num_stages,
                    "num_layers": num_layers,
                    "input_weight": iw,
                    "output_weight": ow,
                    "error": str(e),
                }
            )
    rank_cases = []
    for schedule, pp, n in [
        ("1F1B", 4, 4),
        ("Interleaved1F1B", 4, 8),
        ("Interleaved1F1B", 2, 8),
        ("InterleavedZeroBubble", 4, 12),
        ("ZBVZeroBubble", 4, 8),
        ("DualPipeV", 2, 4),
        ("LoopedBFS", 3, 6),
    ]:
        rank_cases.append(
            {
                "schedule": schedule,
                "pp": pp,
                "num_stages": n,
                "stages_of_rank": [
                    list(tt["_get_pp_rank_to_stage_indices_mapping"](r, pp, schedule, n))
                    for r in range(pp)
                ],
            }
        )
    uniform_cases = [
        {"num_items": n, "num_parts": k, "parts": ds["partition_uniform"](n, k)}
        for n in (1, 3, 4, 7, 8, 10, 13, 34, 35, 64)
        for k in (1, 2, 3, 4, 8)
    ]
    balanced_cases = []
    for w, k in [
        ([1] * 10, 4),
        ([5, 1, 1, 1, 1, 1, 1, 1, 1, 6], 4),
        ([0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0], 4),
        ([3, 1, 1, 1, 1, 1, 1, 1, 1, 4], 2),
        ([1, 2, 3, 4, 5, 6, 7, 8], 3),
    ]:
        balanced_cases.append(
            {
                "weights": w,
                "num_parts": k,
                "parts": [int(x) for x in ds["partition_balanced"](w, k)],
            }
        )

    data = {
        "versions": {
            "torchtitan": version_of(args.torchtitan, "torchtitan"),
            "deepspeed": version_of(args.deepspeed, "deepspeed"),
            "torch": torch.__version__,
        },
        "sources": {
            "torchtitan": "torchtitan/distributed/pipeline_parallel.py "
            "_generate_llm_fqn_per_model_part, _get_pp_rank_to_stage_indices_mapping",
            "deepspeed": "deepspeed/runtime/utils.py partition_uniform, partition_balanced "
            "(PipelineModule._partition_layers)",
        },
        "torchtitan_fqns": fqn_cases,
        "torchtitan_ranks": rank_cases,
        "deepspeed_uniform": uniform_cases,
        "deepspeed_balanced": balanced_cases,
    }
    pathlib.Path(args.output).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(
        f"wrote {args.output}: {len(fqn_cases)} fqn, {len(rank_cases)} rank, "
        f"{len(uniform_cases)} uniform, {len(balanced_cases)} balanced cases; {data['versions']}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
