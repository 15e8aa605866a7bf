"""`vppctl sample` output is pinned, and stamping is exact and actually used.

The generator stamps decoder layers from templates instead of encoding every op
(see vppctl/sample.py). DIGESTS were recorded from the op-by-op encoder before
stamping existed (protobuf 7.36, Python 3.11), so these tests fail on any byte of
difference. If the sample format changes on purpose, refresh the table with
`python tests/test_sample_speed.py` (it prints the digests of the current code).
"""

from __future__ import annotations

import hashlib
import sys
from typing import Any

import pytest

from vppctl import program_pb2 as pb
from vppctl.load import varint as encode_varint
from vppctl.sample import SampleOptions, build_sample, encode, sections, stamp

# (options, size in bytes, sha256): every layout and option, meshes with 2-byte
# rank ids, dims past 2**31, and programs long enough for op ids and counters to
# change width (1000 layers) in the middle of stamped runs.
DIGESTS: list[tuple[dict[str, Any], int, str]] = [
    (
        dict(layers=1, pp=1),
        102615,
        "36c675002e22560764c9183ed85982c3e1daa83b6f878def2ef44323d7f4bfca",
    ),
    (
        dict(layers=2, pp=2, hidden=64, vocab=1000),
        173181,
        "3ca71be763ae3ed3f9b50352be63a18f595d5a64eaec48093d5fd8c1f38c6832",
    ),
    (
        dict(layers=3, pp=1),
        244325,
        "107d1cf15be188eeb63f0b297c71a87d6a11d060385c6fe1becd3ded7ef2db06",
    ),
    (
        dict(layers=7, pp=7, ranks_per_stage=300),
        5645517,
        "8b18894988c94844cbadce8154eaf60545d1d89d85efb691adc77d4e1bb92b46",
    ),
    (
        dict(layers=13, pp=6, hidden=64, vocab=1000),
        960924,
        "7049ea199c1622a0b41cf9333a529d17a7ff55839bf4bc3a1529053bc411e777",
    ),
    (
        dict(layers=64, pp=1, hidden=64, vocab=1000),
        4640577,
        "2d4fded8ca86a6ee048ee628f00132b51253451f6cfa3b26a394e751fc32a9e1",
    ),
    (
        dict(layers=100, pp=5),
        7271668,
        "48f86101e593a5b4bdf4319d6555785ee480b2bebdeb922d229a47fa1ce630b0",
    ),
    (
        dict(layers=130, pp=3),
        9450884,
        "3fd773047f3faabd1ae5791262ccd69829512accab4d92518f3333bd9106897d",
    ),
    (
        dict(layers=130, pp=5, hidden=16384, vocab=2147483647),
        9476184,
        "c60b084e89841f4f97e753a5f76db6d22ebcb628a3404263a279d5907df143d0",
    ),
    (
        dict(layers=20, pp=4, layout="interleaved", vpp=5),
        1464042,
        "472b3de2a53dc9ec6e888164e32e4dc1dfeb475578898af672eaa07e1e5ea86f",
    ),
    (
        dict(layers=96, pp=8, layout="interleaved", vpp=3, ranks_per_stage=16, callstack=True),
        19738681,
        "7234dcb14eb26de625eff9ce042eb54850128dcfa5405c81296d10c8811351b3",
    ),
    (
        dict(
            layers=24, pp=4, ranks_per_stage=3, hidden=64, vocab=1000, layout="interleaved", vpp=2
        ),
        1820587,
        "ad5590c4f89c9fbad358065bd668c53cc43790a84340e40bf5cf9282460157ed",
    ),
    (
        dict(layers=24, pp=4, backward=False, hidden=64, vocab=1000),
        412677,
        "9ba1822754921b3b07a2fe2c2ee429347b69b7c8a33ec0cc6b4279198a771a2b",
    ),
    (
        dict(layers=24, pp=4, optimizer="sgd", hidden=64, vocab=1000),
        1391141,
        "471ebd28133e53f235859eabbe65fe393952a2c7937977a868aaa1c1f285377d",
    ),
    (
        dict(layers=24, pp=4, optimizer="none", hidden=64, vocab=1000),
        964214,
        "d5d9b9fc0a063ab1bcac5b5bf87fd4cf90c475f54bcb5c0769d6c36f68a91974",
    ),
    (
        dict(layers=24, pp=4, grad_clip=False, hidden=64, vocab=1000),
        1470115,
        "55bb159266bd283a042dde952343b35bfbaaf031aaa32c01675f68f11b5f799d",
    ),
    (
        dict(
            layers=16, pp=8, optimizer="sgd", grad_clip=False, callstack=True, hidden=192, vocab=7
        ),
        2064343,
        "1afa11b25a544fb078205c48ae22ac94e0058742ec96a195438b5a818388ba2d",
    ),
    (
        dict(layers=12, pp=3, ranks_per_stage=3, callstack=True, layout="interleaved", vpp=1),
        2281751,
        "b3f0af1b2a453d388a47782cd3ad5b5102ad6a75cc7be42e83848e83675f5528",
    ),
    (
        dict(layers=1000, pp=8, hidden=64, vocab=1000),
        73539755,
        "c50b01ecf9575594f84c58096c2753774382bddc3358516844dc2b47313bf830",
    ),
    (
        dict(layers=400, pp=3, optimizer="sgd", grad_clip=False, hidden=64, vocab=1000),
        18603205,
        "60ab333ad2dbb8db42cbeb2fea3a31d8cd5954f23fc3a7955ecd7530bfd76270",
    ),
]

# The 10,000-layer program of the benchmarks (~920k ops, 747 MB); slow.
BIG = (
    dict(layers=10000, pp=8),
    746700103,
    "ada8d051c78da2ef6301cc7d68cf80f475886e0416620ca36abbfa6b0acc0ea1",
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
    stamp, record = encode.Writer.stamp, encode.Writer.record

    def counting_stamp(self: encode.Writer, *args: Any) -> None:
        counts["stamped"] += 1
        stamp(self, *args)

    def counting_record(self: encode.Writer, *args: Any) -> encode.UnitBytes:
        counts["encoded"] += 1
        return record(self, *args)

    monkeypatch.setattr(encode.Writer, "stamp", counting_stamp)
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
        args = ", ".join(f"{k}={v!r}" for k, v in opts.items())
        print(f'    (dict({args}), {len(data)}, "{hashlib.sha256(data).hexdigest()}"),')


if __name__ == "__main__":
    _print_digests()
    sys.exit(0)
