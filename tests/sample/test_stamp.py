"""`vppctl sample` output is pinned, and stamping is exact and actually used.

The generator stamps decoder layers from templates instead of encoding every op
(see vppctl/sample/). DIGESTS were first recorded from the op-by-op encoder before
stamping existed (protobuf 7.36, Python 3.11), so these tests fail on any byte of
difference. If the sample format changes on purpose, refresh the table with
`python tests/sample/test_stamp.py` (it prints the digests of the current code,
each built twice, stamped and with every stamped layer also encoded op by op,
and refuses to print if the two differ). Last refresh: boundary gradients on
their forward variable's mesh, and no separate world mesh at pp 1 (issue 15).

The tests here also cover vppctl/sample/encode.py and vppctl/sample/sections.py, which have
no test file of their own.
"""

from __future__ import annotations

import hashlib
import sys
from typing import Any

import pytest

from vppctl.program._proto import program_pb2 as pb
from vppctl.program.load import varint as encode_varint
from vppctl.sample import SampleOptions, build_sample, encode, sections, stamp

# (options, size in bytes, sha256): every layout and option, meshes with 2-byte
# rank ids, dims past 2**31, and programs long enough for op ids and counters to
# change width (1000 layers) in the middle of stamped runs.
DIGESTS: list[tuple[dict[str, Any], int, str]] = [
    (
        dict(layers=1, pp=1),
        102364,
        "3485e6b61d80789ce9bbae1f9a7910e930148e4e1ac16f261605bc93e6c56af7",
    ),
    (
        dict(layers=2, pp=2, hidden=64, vocab=1000),
        173181,
        "122fd7a41b53a7d168af2e98b465b7d64c18337766578e6ce1b448621c6d3233",
    ),
    (
        dict(layers=3, pp=1),
        243930,
        "782b5b6adf8f4617f596f73f52fa62f13ac89523addde03af06f6a1fb28d711c",
    ),
    (
        dict(layers=7, pp=7, ranks_per_stage=300),
        5645389,
        "168218ed1f99c979e876254441311d1354ffd268ccb696bb2430575c3156660b",
    ),
    (
        dict(layers=13, pp=6, hidden=64, vocab=1000),
        960924,
        "2287edc24c062977bc2c795e3def5abbc435de1b60b647d891c3f7e4dba65c59",
    ),
    (
        dict(layers=64, pp=1, hidden=64, vocab=1000),
        4635790,
        "32844117b491aa9593022b7d731264b2375f4be30baab71d18bd97d8454566e9",
    ),
    (
        dict(layers=100, pp=5),
        7271668,
        "ba157457f39bbb151805ccfb80b955d80c033fe3e7dd41f2ffa61aeae66b907d",
    ),
    (
        dict(layers=130, pp=3),
        9450884,
        "ce96a520b2b394a79ee5c0ba566b96e6c026e34aab977ffd9275d822d24ef98c",
    ),
    (
        dict(layers=130, pp=5, hidden=16384, vocab=2147483647),
        9476184,
        "041deba11d55d68fd94429832eee7c5b68c5177c1472fcf92ec6f164a6c70827",
    ),
    (
        dict(layers=20, pp=4, layout="interleaved", vpp=5),
        1464042,
        "daa702d823b91cd598887b3e56866258d5262198101375764520b76356356185",
    ),
    (
        dict(layers=96, pp=8, layout="interleaved", vpp=3, ranks_per_stage=16, callstack=True),
        19738681,
        "a13e6315c858a08f6d098d39e12e251ffbfdf757c0035854bed05749f695901b",
    ),
    (
        dict(
            layers=24, pp=4, ranks_per_stage=3, hidden=64, vocab=1000, layout="interleaved", vpp=2
        ),
        1820587,
        "9f08f4a7be178a67759833570eb884b0aeba9b039c48698bb72f39cfb832d311",
    ),
    (
        dict(layers=24, pp=4, backward=False, hidden=64, vocab=1000),
        412677,
        "9ba1822754921b3b07a2fe2c2ee429347b69b7c8a33ec0cc6b4279198a771a2b",
    ),
    (
        dict(layers=24, pp=4, optimizer="sgd", hidden=64, vocab=1000),
        1391141,
        "9ab123b2c9f491212eb43955dca38c7452ef81fdfa3a3b8cc452416edacb59df",
    ),
    (
        dict(layers=24, pp=4, optimizer="none", hidden=64, vocab=1000),
        964214,
        "1d616a05a409a6240712226b334a8db5ba33889436d068244bf4981490937230",
    ),
    (
        dict(layers=24, pp=4, grad_clip=False, hidden=64, vocab=1000),
        1470115,
        "85fe74519350dca43f82409c5f1a22df22fe5e37cecddaa384432202741907eb",
    ),
    (
        dict(
            layers=16, pp=8, optimizer="sgd", grad_clip=False, callstack=True, hidden=192, vocab=7
        ),
        2064343,
        "1ff1a4856398a1f5929efee557bba36bb1b9a6ad9ccc383d831cbf07cd71c816",
    ),
    (
        dict(layers=12, pp=3, ranks_per_stage=3, callstack=True, layout="interleaved", vpp=1),
        2281751,
        "dce900e3617b2abed26c764812e6e5601647402d93c47707ff2694c3b8f88f59",
    ),
    (
        dict(layers=1000, pp=8, hidden=64, vocab=1000),
        73539755,
        "5de10c0233a62619726ca746209583fda057babb949fc06ce48538220602ceb8",
    ),
    (
        dict(layers=400, pp=3, optimizer="sgd", grad_clip=False, hidden=64, vocab=1000),
        18603205,
        "6be9ecd4c38da536a8a8a7970010c69a298a899006203a293fbf6fa3011b0368",
    ),
]

# The 10,000-layer program of the benchmarks (~920k ops, 747 MB); slow.
BIG = (
    dict(layers=10000, pp=8),
    746700103,
    "f0f0de196ec3d2c00d56ced56f2262ed85a22f8764a6e7079eb4948795474895",
)


def _label_opts(opts: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in opts.items())


def _label(case: tuple[dict[str, Any], int, str]) -> str:
    return _label_opts(case[0])


@pytest.mark.parametrize("case", DIGESTS, ids=_label)
def test_output_matches_the_op_by_op_encoder(case: tuple[dict[str, Any], int, str]) -> None:
    opts, size, digest = case
    data = build_sample(SampleOptions(**opts))
    assert len(data) == size
    assert hashlib.sha256(data).hexdigest() == digest


@pytest.mark.slow
def test_big_program_matches_the_op_by_op_encoder() -> None:
    opts, size, digest = BIG
    data = build_sample(SampleOptions(**opts))
    assert (len(data), hashlib.sha256(data).hexdigest()) == (size, digest)


@pytest.mark.parametrize(
    "opts",
    [
        dict(layers=100, pp=4, hidden=64, vocab=1000),
        dict(
            layers=72, pp=3, layout="interleaved", vpp=4, ranks_per_stage=2, hidden=64, vocab=1000
        ),
        dict(layers=80, pp=2, optimizer="sgd", grad_clip=False, callstack=True, hidden=64),
        dict(layers=90, pp=3, backward=False, hidden=64, vocab=1000),
    ],
    ids=_label_opts,
)
def test_stamped_layers_equal_encoded_layers(opts: dict[str, Any]) -> None:
    """With check=True every stamped layer is also encoded op by op and compared."""
    checked = sections._build(SampleOptions(**opts), check=True)
    assert checked == build_sample(SampleOptions(**opts))


@pytest.mark.parametrize(
    "opts",
    [
        dict(layers=1, pp=1),
        dict(layers=40, pp=4, hidden=64, vocab=1000, callstack=True),
        dict(layers=96, pp=8, layout="interleaved", vpp=3, hidden=64, vocab=1000),
    ],
    ids=_label_opts,
)
def test_output_is_canonical(opts: dict[str, Any]) -> None:
    """Parsing with the full schema and serializing again gives the same bytes."""
    data = build_sample(SampleOptions(**opts))
    assert pb.ProgramDesc.FromString(data).SerializeToString() == data


def test_long_programs_are_mostly_stamped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the speed comes from: only a few layer chunks are encoded op by op."""
    counts = {"stamped": 0, "encoded": 0}
    stamp_unit, record = stamp.stamp_unit, encode.Writer.record

    def counting_stamp(*args: Any) -> None:
        counts["stamped"] += 1
        stamp_unit(*args)

    def counting_record(self: encode.Writer, *args: Any) -> encode.UnitBytes:
        counts["encoded"] += 1
        return record(self, *args)

    monkeypatch.setattr(stamp, "stamp_unit", counting_stamp)
    monkeypatch.setattr(encode.Writer, "record", counting_record)
    build_sample(SampleOptions(layers=400, pp=2, hidden=64, vocab=1000))
    # 400 layers x 6 sections (parameters, forward, backward, clip x 2, optimizer)
    assert counts["stamped"] + counts["encoded"] == 2400
    assert counts["encoded"] < 150


@pytest.mark.parametrize("width", [1, 2, 3, 4, 5])
def test_numbers_keep_their_width_within_a_run(width: int) -> None:
    """Stamped numbers equal the encoder's, and a run ends before one changes width."""
    numbers = stamp.Numbers()
    low = 128 ** (width - 1) if width > 1 else 0
    found = [
        numbers.add(True, low + 5, low + 5 + 29),  # an op id that grows (a varint)
        numbers.add(False, 10 ** (width - 1) + 3, 10 ** (width - 1) + 10),  # a number in a name
    ]
    if width > 1:  # one that shrinks (one-byte varints stay one byte down to 0)
        found.append(numbers.add(True, 128**width - 40, 128**width - 43))
    positions = numbers.freeze()
    last = numbers.last_step()
    for k in range(last + 1):
        values = numbers.values(k)
        for varint, a, d in found:
            got = [values[i] for i in positions[varint, a, d]]
            if varint:
                assert bytes(got) == encode_varint(a + k * d)
            else:
                assert got == [a + k * d]
            assert _width(varint, a + k * d) == _width(varint, a)
    assert any(_width(varint, a + (last + 1) * d) != _width(varint, a) for varint, a, d in found)


def _width(varint: bool, value: int) -> int:
    return len(encode_varint(value)) if varint else len(str(value))


def _print_digests() -> None:
    for opts, _, _ in DIGESTS:
        data = build_sample(SampleOptions(**opts))
        if sections._build(SampleOptions(**opts), check=True) != data:
            raise SystemExit(f"stamped and encoded programs differ for {opts}")
        args = ", ".join(f"{k}={v!r}" for k, v in opts.items())
        print(f'    (dict({args}), {len(data)}, "{hashlib.sha256(data).hexdigest()}"),')


if __name__ == "__main__":
    _print_digests()
    sys.exit(0)
