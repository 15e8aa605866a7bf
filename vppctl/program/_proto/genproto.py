"""Regenerate vppctl/program/_proto/*_pb2.py(i) from proto/ (needs grpcio-tools, the `test` extra).

    python -m vppctl.program._proto.genproto            # rewrite the generated files
    python -m vppctl.program._proto.genproto --check    # exit 1 if they differ from proto/

The generated code is checked in so that installing vppctl needs no protoc;
tests/program/test_genproto.py runs the check.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]  # the repository: proto/ and vppctl/
HERE = Path(__file__).resolve().parent  # where the generated modules live
PROTOS = ("vppctl/program.proto", "vppctl/view.proto")
MODULE = "vppctl.program._proto"
OUTPUTS = ("program_pb2.py", "program_pb2.pyi", "view_pb2.py", "view_pb2.pyi")


def generate() -> dict[str, bytes]:
    """The generated modules, by file name, as they belong here.

    protoc names a module by its proto's path (`vppctl/view.proto` -> `vppctl.view_pb2`),
    and the .proto files keep that path, so the one line naming the module is set to
    where the modules live (`vppctl.program._proto`): the message classes' `__module__`.
    """
    from grpc_tools import protoc  # type: ignore[import-untyped]

    with tempfile.TemporaryDirectory() as tmp:
        args = [
            "protoc",
            f"-I{ROOT / 'proto'}",
            f"--python_out={tmp}",
            f"--pyi_out={tmp}",
            *(str(ROOT / "proto" / p) for p in PROTOS),
        ]
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed")
        out = {name: (Path(tmp) / "vppctl" / name).read_bytes() for name in OUTPUTS}
    for name in OUTPUTS:
        stem = name.removesuffix(".py")
        if stem != name:
            out[name] = out[name].replace(
                f"'vppctl.{stem}'".encode(), f"'{MODULE}.{stem}'".encode()
            )
    return out


def differences() -> list[str]:
    """The generated files that differ from what proto/ gives."""
    return [name for name, data in generate().items() if data != (HERE / name).read_bytes()]


def main(argv: list[str]) -> int:
    if "--check" in argv:
        diff = differences()
        if diff:
            print(
                f"out of date: {', '.join(diff)}; run python -m {MODULE}.genproto", file=sys.stderr
            )
            return 1
        return 0
    for name, data in generate().items():
        (HERE / name).write_bytes(data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
