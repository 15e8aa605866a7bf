"""Record: the pipeline plan a converted program carries (`ProgramDesc` field 1002).

`write_plan` records a `Plan`; `read_plan` reads it back as a `RecordedPlan` of
plain values (verify checks it against the ops, simulate replays it).
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.message import DecodeError

from vppctl._version import __version__
from vppctl.errors import ProgramFileError
from vppctl.mesh import Mesh
from vppctl.plan import Plan
from vppctl.program._proto import program_pb2 as pb
from vppctl.program._proto import view_pb2 as view
from vppctl.program.reads import as_text


def write_plan(program: view.LazyProgram, plan: Plan) -> None:
    """Record the plan in `ProgramDesc.pipeline_plan` (field 1002)."""
    msg = pb.PipelinePlan(
        pp=plan.pp,
        vpp=plan.vpp,
        seg_method=plan.seg_method,
        placement=plan.placement,
        mode=plan.mode,
        vppctl_version=__version__,
        split=plan.split,
        cost=plan.cost_kind,
    )
    for s in plan.segments:
        msg.segments.add(
            virtual_stage=s.virtual_stage,
            stage=s.stage,
            chunk=s.chunk,
            mesh=pb.ProcessMesh(
                shape=s.mesh.shape, process_ids=s.mesh.process_ids, dim_names=s.mesh.dim_names
            ),
            layers=s.layers,
            op_begin=s.op_begin,
            op_end=s.op_end,
            cost=s.cost,
        )
    del program.pipeline_plan[:]  # occurrences of one field (view.proto): now one
    program.pipeline_plan.append(msg.SerializeToString())


# vppctl 0.1.0 recorded the --layers-per-chunk split as "manual".
_SPLIT_NAMES = {"manual": "explicit"}


@dataclass(frozen=True)
class RecordedSegment:
    """One segment of a recorded plan, as plain values."""

    virtual_stage: int
    stage: int
    chunk: int
    mesh: Mesh | None  # None: not recorded (or not a valid mesh)
    layers: tuple[str, ...]
    op_begin: int  # -1: not recorded
    op_end: int
    cost: float


@dataclass(frozen=True)
class RecordedPlan:
    """The plan a program carries, as plain values."""

    pp: int
    vpp: int
    seg_method: str
    placement: str
    mode: str
    split: str
    segments: tuple[tuple[int, int, tuple[str, ...]], ...]  # (stage, chunk, layers)
    vppctl_version: str
    cost_kind: str = ""
    details: tuple[RecordedSegment, ...] = ()  # the segments with all they record

    @classmethod
    def of(cls, plan: Plan) -> RecordedPlan:
        """What `write_plan` records for `plan`, read back (convert checks its own plan)."""
        details = tuple(
            RecordedSegment(
                s.virtual_stage, s.stage, s.chunk, s.mesh, s.layers, s.op_begin, s.op_end, s.cost
            )
            for s in plan.segments
        )
        return cls(
            pp=plan.pp,
            vpp=plan.vpp,
            seg_method=plan.seg_method,
            placement=plan.placement,
            mode=plan.mode,
            split=plan.split,
            segments=tuple((s.stage, s.chunk, s.layers) for s in plan.segments),
            vppctl_version=__version__,
            cost_kind=plan.cost_kind,
            details=details,
        )


def read_plan(program: view.LazyProgram) -> RecordedPlan | None:
    if not program.pipeline_plan:
        return None
    try:  # the occurrences of the field, joined, parse as protobuf merges them
        m = pb.PipelinePlan.FromString(b"".join(program.pipeline_plan))
    except DecodeError:
        raise ProgramFileError("not a program: its pipeline_plan (field 1002) is corrupt") from None
    return RecordedPlan(
        pp=m.pp,
        vpp=m.vpp,
        seg_method=as_text(m.seg_method),
        placement=as_text(m.placement),
        mode=as_text(m.mode),
        split=_SPLIT_NAMES.get(as_text(m.split), as_text(m.split)),
        vppctl_version=as_text(m.vppctl_version),
        segments=tuple((s.stage, s.chunk, tuple(map(as_text, s.layers))) for s in m.segments),
        cost_kind=as_text(m.cost),
        details=tuple(_recorded_segment(s) for s in m.segments),
    )


def _recorded_segment(s: pb.PlanSegment) -> RecordedSegment:
    mesh = None
    if s.HasField("mesh"):
        m = s.mesh
        mesh = Mesh(tuple(m.shape), tuple(m.process_ids), tuple(map(as_text, m.dim_names)))
        if mesh.problem():  # a plan's mesh is only compared, never used: an odd one is no mesh
            mesh = None
    return RecordedSegment(
        virtual_stage=s.virtual_stage,
        stage=s.stage,
        chunk=s.chunk,
        mesh=mesh,
        layers=tuple(map(as_text, s.layers)),
        op_begin=s.op_begin if s.HasField("op_begin") else -1,
        op_end=s.op_end if s.HasField("op_end") else -1,
        cost=s.cost,
    )
