"""The checked-in generated protobuf code matches proto/ exactly."""

import pytest

from vppctl.program._proto import genproto


def test_generated_code_is_current() -> None:
    pytest.importorskip("grpc_tools", reason="grpcio-tools is in the test extra")
    assert genproto.differences() == [], "run: python -m vppctl.program._proto.genproto"
