"""Regenerate vppctl/*_pb2.py(i) from proto/ (needs grpcio-tools, the `test` extra).

    python -m vppctl.program._proto.genproto            # rewrite the generated files
    python -m vppctl.program._proto.genproto --check    # exit 1 if they differ from proto/

The generated code is checked in so that installing vppctl needs no protoc;
tests/test_proto_generated.py runs the check.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PROTOS = ("vppctl/program.proto", "vppctl/view.proto")
OUTPUTS = ("program_pb2.py", "program_pb2.pyi", "view_pb2.py", "view_pb2.pyi")


def generate(out_dir: Path) -> None:
    from grpc_tools import protoc  # type: ignore[import-untyped]

    args = [
        "protoc",
        f"-I{ROOT / 'proto'}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        *(str(ROOT / "proto" / p) for p in PROTOS),
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")


def differences() -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp))
        return [
            name
            for name in OUTPUTS
            if (Path(tmp) / "vppctl" / name).read_bytes() != (ROOT / "vppctl" / name).read_bytes()
        ]


def main(argv: list[str]) -> int:
    if "--check" in argv:
        diff = differences()
        if diff:
            print(f"out of date: {', '.join(diff)}; run python -m vppctl.program._proto.genproto", file=sys.stderr)
            return 1
        return 0
    generate(ROOT)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
