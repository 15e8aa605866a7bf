"""Small programs that once took unbounded time or memory: one generator per class.

Used by tests/contract/test_bounds.py (each with a time and memory budget) and by the fuzzer
(tests/contract/test_fuzz.py), so that the next input of a known class is found by CI:

    many_stage_meshes(n, chunk)    n one-rank stage meshes, one op per mesh, one op with a
                                   huge chunk id (a pp*vpp table was 8 GB at n=20,000)
    deep_sub_blocks(depth, refs)   a chain of sub_blocks whose ops name a global variable
                                   `refs` times each (an ancestor walk per name)
    empty_blocks(n)                n empty blocks (per-block side tables)
    recorded_regex(data, pattern)  a converted program whose recorded plan carries a
                                   regex that backtracks exponentially
    huge_dims(data, n)             parameters of n dims of 2**62 (huge ints in reports)
    odd_callstacks(data)           op_callstack attrs encoded non-canonically
    deep_nesting(depth)            groups nested `depth` deep after a program
    long_text_line(n)              a text-format program on one line of n bytes, broken
    escaped_text(n, escape)        a text-format program whose struct name is n bytes of one
                                   escape (protobuf's tokenizer took ~140 bytes per byte)
    huge_string_attr(data, n)      a program with one op carrying an n-byte string attr
                                   (convert held it 4x over)
"""

from __future__ import annotations

from vppctl.program._proto import program_pb2 as pb

EVIL_REGEXES = ("(a+)+$", "(.|.)*!", "(x+x+)+y", "(D|De|Dec)*Z")


def _mesh(stage: int) -> pb.ProcessMesh:
    return pb.ProcessMesh(shape=[1], process_ids=[stage], dim_names=["x"])


def many_stage_meshes(n: int, chunk: int = 4095) -> bytes:
    p = pb.ProgramDesc()
    block = p.blocks.add(idx=0, parent_idx=-1)
    for s in range(n):
        p.process_meshes.append(_mesh(s))
        op = block.ops.add(type="relu", struct_name=f"/M/Layer_{s}/")
        op.dist_attr.process_mesh.CopyFrom(_mesh(s))
        op.dist_attr.chunk_id = chunk if s == 0 else 0
    return p.SerializeToString()


def deep_sub_blocks(depth: int, refs: int) -> bytes:
    p = pb.ProgramDesc()
    root = p.blocks.add(idx=0, parent_idx=-1)
    var = root.vars.add(name="g")
    var.type.type = pb.VarType.DENSE_TENSOR
    var.type.dense_tensor.tensor.data_type = pb.VarType.FP32
    root.ops.add(type="while").attrs.add(name="sub_block", type=pb.BLOCK, block_idx=1)
    for d in range(1, depth + 1):
        block = p.blocks.add(idx=d, parent_idx=d - 1)
        block.ops.add(type="relu").inputs.add(parameter="X", arguments=["g"] * refs)
        if d < depth:
            op = block.ops.add(type="while")
            op.attrs.add(name="sub_block", type=pb.BLOCK, block_idx=d + 1)
    return p.SerializeToString()


def empty_blocks(n: int) -> bytes:
    p = pb.ProgramDesc()
    p.blocks.add(idx=0, parent_idx=-1)
    for i in range(1, n):
        p.blocks.add(idx=i, parent_idx=0)
    return p.SerializeToString()


def recorded_regex(converted: bytes, pattern: str) -> bytes:
    p = pb.ProgramDesc.FromString(converted)
    p.pipeline_plan.seg_method = pattern
    return p.SerializeToString()


def huge_dims(data: bytes, n: int = 300) -> bytes:
    p = pb.ProgramDesc.FromString(data)
    for var in p.blocks[0].vars:
        if var.is_parameter:
            dims = var.type.dense_tensor.tensor.dims
            del dims[:]
            dims.extend([2**62] * n)
    return p.SerializeToString()


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def odd_callstacks(data: bytes) -> bytes:
    """Every op gets three op_callstack attrs no prefix test finds: type before name, a
    two-byte length for the name, and the name given twice (the last one counts). The
    bytes are appended to each serialized op as they are (parsing would normalise them)."""
    from vppctl.program.load import parse_program

    name = b"op_callstack"
    frames = _field(8, b'File "/home/someone/train.py", line 1') * 3  # Attr.strings
    strings_type = b"\x10\x05"  # Attr.type = STRINGS (5)
    attrs = (
        strings_type + _field(1, name) + frames,
        b"\x0a\x8c\x00" + name + strings_type + frames,  # name length 12 in two bytes
        _field(1, b"junk") + _field(1, name) + strings_type + frames,
    )
    extra = b"".join(_field(4, a) for a in attrs)  # OpDesc.attrs = 4
    program = parse_program(data)
    for block in program.blocks:
        block.ops = [op + extra for op in block.ops]
    return program.to_bytes()


def deep_nesting(depth: int) -> bytes:
    """A one-block program followed by an unknown field of groups nested `depth` deep
    (groups are the one wire type a parser must descend into to skip)."""
    program = pb.ProgramDesc()
    program.blocks.add(idx=0, parent_idx=-1)
    field = 15
    return (
        program.SerializeToString()
        + bytes([field << 3 | 3]) * depth
        + bytes([field << 3 | 4]) * depth
    )


def long_text_line(n: int) -> bytes:
    """One line of text format, `n` bytes long, with a syntax error at the end."""
    body = b"blocks { idx: 0 parent_idx: -1 " + b'vars { name: "x" type { type: 7 } } ' * (n // 36)
    return body + b"} }} oops"


def escaped_text(n: int, escape: str = "\\000") -> bytes:
    """A valid one-op text-format program whose struct name is `n` bytes of `escape`."""
    body = escape * (n // len(escape))
    return (
        'blocks { idx: 0 parent_idx: -1 ops { type: "relu" struct_name: "' + body + '" } }\n'
    ).encode()


def huge_string_attr(data: bytes, n: int) -> bytes:
    """`data` with its sixth op carrying a string attr of `n` bytes."""
    from vppctl.program.load import parse_program

    attr = pb.OpDesc.Attr(name="note", type=pb.STRING, s="x" * n).SerializeToString()
    program = parse_program(data)
    ops = program.blocks[0].ops
    ops[5] += _field(4, attr)  # OpDesc.attrs = 4, appended as it is
    return program.to_bytes()
