"""Many ranks as one job: who waits for whom, how big each collective was, what to fix.

Pure: rank summaries (:class:`~nbprof.analysis.rank.RankSummary`) in, a
:class:`JobDiagnosis` out. Nothing here reads a file.

One job
    Files form one job when their ``distributedInfo`` agree: every file names its rank,
    no two name the same one, all name the same world size and backend, the ranks ran the
    same GPU model, and their wall-clock windows overlap. :func:`check` says, in one line
    naming the files, where they do not; a caller may force the files into one job anyway
    (they are then numbered in file order where their ranks are missing or clash).

Collectives across ranks
    The k-th call of a process group's collectives on one rank is the k-th on every other:
    NCCL requires that every member issue a group's collectives in the same order. Calls
    are matched by (group, sequence number) where the trace records PyTorch's ``Seq``, else
    by (group, kind, k). A rank *arrives* at a collective when its kernel starts on the GPU
    (from then on it can only wait for the others or move data); the collective cannot
    finish before its last member arrives, so a rank that arrived earlier *waits* until
    then (at most its kernel's duration), and the data moves in the last rank's kernel time:
    that is the collective's duration, from which algorithm and bus bandwidth follow
    (:mod:`nbprof.analysis.collectives`). Ranks are placed on one time axis by their files'
    wall-clock timestamps; without them, each rank's wait is estimated as its kernel's time
    beyond the shortest one's.

The straggler
    The rank the others wait for: the waits at a collective are charged to its last
    arrival. A rank is a straggler when the wait it causes, per other rank, is at least
    :data:`~nbprof.analysis.verdict.FINDING_STALL_PCT` of the median GPU span (a stall worth
    a finding of its own); its own bottleneck is its rank's verdict. A straggler may be
    late only because it began its profiled window late: at the first collective it
    shares with a peer, as much of the peer's wait as it started after that peer came
    into the trace with it, and what caused it lies before the trace. That part is
    named, and where it is most of the waits, the fix is to profile more steps, not to
    blame the straggler's own limit inside the trace.

The verdict
    The job's GPU time (all ranks' spans together) is cut as each rank's span is
    (:mod:`nbprof.analysis.stalls`), exposed communication split into the part ranks spent
    waiting for a later rank with nothing to hide it (*skew*) and the rest (*transfer*).
    The largest stall decides when it covers :data:`~nbprof.analysis.verdict.STALL_PCT` of
    the job's GPU time, as it does for one device: exposed communication makes the job
    communication-bound, *because of skew* when the waits are the larger part (the fix is
    the slow rank's, not the network's) and *because of exposed communication* otherwise
    (overlap, bucketing). Any other stall gives its own verdict, weighed against the
    communication share: a close call unless the waits are mostly for a straggler whose
    own limit is that stall, or mostly a late start whose cause the trace cannot hold and
    which stays below :data:`~nbprof.analysis.verdict.CLOSE_CALL` of that stall. With no
    stall, the ranks' own verdicts (the busiest rank's) stand.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from nbprof.analysis import _frames
from nbprof.analysis import intervals as iv
from nbprof.analysis.collectives import P2P_KINDS, bus_factor, link_peak
from nbprof.analysis.model import (
    Basis,
    Bottleneck,
    Confidence,
    DeviceMetrics,
    Finding,
    VerdictBasis,
)
from nbprof.analysis.rank import RankFailure, RankSummary
from nbprof.analysis.stalls import RAN
from nbprof.analysis.verdict import CLOSE_CALL, FINDING_STALL_PCT, STALL_PCT, STALLS, shares_of
from nbprof.errors import TraceError, plain_text
from nbprof.units import duration as _us
from nbprof.units import share as _pct

logger = logging.getLogger(__name__)

SCHEMA_KEY = "job"
#: How many file names a one-line error lists before "(+N more)".
_NAMED = 3
#: How many ranks beyond the files given a world size may claim and still be believed
#: (see :func:`believed_world`).
BELIEVED_MARGIN = 64


class NotOneJob(TraceError):
    """The files are not one job; the reason names the files that disagree."""


# -- one job? ----------------------------------------------------------------------------


def _name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def _files(paths: list[str]) -> str:
    names = [_name(p) for p in paths]
    more = f" (+{len(names) - _NAMED} more)" if len(names) > _NAMED else ""
    return ", ".join(names[:_NAMED]) + more


def _disagree(what: str, values: dict[str, Any]) -> str:
    """'<what> differ: 8 in a.json, b.json; 16 in c.json' for a {path: value} map."""
    by: dict[str, list[str]] = {}
    for path, v in values.items():
        by.setdefault(str(v), []).append(path)
    parts = [f"{v} in {_files(ps)}" for v, ps in sorted(by.items(), key=lambda kv: -len(kv[1]))]
    return f"{what} differ: " + "; ".join(parts)


#: A rank or world size beyond what a 64-bit integer holds is no count a job can have:
#: such a number is read as no number (JSON output holds 64-bit integers only).
_INT_RANGE = 2**63


def _int(v: Any) -> int | None:
    if isinstance(v, int) and not isinstance(v, bool) and -_INT_RANGE < v < _INT_RANGE:
        return v
    return None


def check(summaries: list[RankSummary]) -> str | None:
    """Why these files are not one job, in one line naming the files; None when they are."""
    if not summaries:
        return None
    no_rank = [s.path for s in summaries if _int(s.info.get("rank")) is None]
    if no_rank:
        named = [s.path for s in summaries if s.path not in no_rank]
        also = f" (while {_files(named)} name one)" if named else ""
        return f"no rank in distributedInfo: {_files(no_rank)}{also}"
    ranks: dict[int, list[str]] = {}
    for s in summaries:
        ranks.setdefault(int(s.info["rank"]), []).append(s.path)
    for r, ps in sorted(ranks.items()):
        if len(ps) > 1:
            return f"rank {r} in more than one file: {_files(ps)}"
    for key, what in (("world_size", "world sizes"), ("backend", "backends")):
        values = {s.path: s.info.get(key) for s in summaries}
        if len({str(v) for v in values.values()}) > 1:
            return _disagree(what, values)
    for s in summaries:
        ws = _int(s.info.get("world_size"))
        if ws is not None and not 0 <= int(s.info["rank"]) < ws:
            return f"rank {s.info['rank']} is outside world_size {ws}: {_name(s.path)}"
    gpus = {s.path: ", ".join(s.device_names) for s in summaries if s.device_names}
    if len(set(gpus.values())) > 1:
        return _disagree("GPUs", gpus)
    wall = [s for s in summaries if s.origin_ns is not None]
    if len(wall) == len(summaries) and len(wall) > 1:
        spans = {
            s.path: (s.origin_ns + s.window[0] * 1e3, s.origin_ns + s.window[1] * 1e3)
            for s in wall
            if s.origin_ns is not None
        }
        start = max(a for a, _ in spans.values())
        end = min(b for _, b in spans.values())
        if start > end:
            first = min(spans, key=lambda p: spans[p][1])
            last = max(spans, key=lambda p: spans[p][0])
            return f"not recorded at the same time: {_name(first)} ends before {_name(last)} starts"
    return None


# -- the result --------------------------------------------------------------------------


@dataclass
class RankRow:
    """One rank in the job's table (its device: the one that ran the most kernel time)."""

    rank: int
    path: str
    device: str
    device_name: str
    gpu_span_us: float
    kernel_busy_pct: float | None
    #: Share of the span a non-collective kernel ran (the time accounting's ``compute``).
    compute_busy_pct: float | None
    exposed_comm_pct: float | None
    #: Share of the span spent waiting inside collectives for a later rank with no compute
    #: kernel beside it (part of exposed_comm_pct).
    wait_pct: float | None
    #: Idle time by cause, share of the span (the time accounting's idle causes).
    idle: dict[str, float]
    #: ProfilerStep number -> its duration (µs) and its exposed communication (µs).
    steps: dict[int, float]
    step_exposed_comm_us: dict[int, float]
    #: When the rank's first event happened, µs after the job's first (None: no clock).
    start_us: float | None
    bottleneck: str
    summary: str
    #: Collectives this rank arrived at last, of those it took part in with others.
    last_count: int = 0
    collective_count: int = 0
    #: µs the other ranks waited for it (at the collectives it arrived at last).
    caused_wait_us: float = 0.0

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["steps"] = {str(k): v for k, v in self.steps.items()}
        d["step_exposed_comm_us"] = {str(k): v for k, v in self.step_exposed_comm_us.items()}
        return d


@dataclass
class CollectiveRow:
    """One collective call, matched across the ranks that made it."""

    index: int
    kind: str
    pg: str
    #: PyTorch's sequence number on the group (-1: matched by order instead).
    seq: int
    #: Its place among the group's calls of its kind (what matched it without ``seq``).
    order: int
    name: str
    #: Bytes of the whole operation (NCCL's S; None unknown) and where they came from.
    bytes: int | None
    size_from: str
    group_size: int
    ranks: list[int]
    #: Group members with no record of this call (a missing rank file, or a mismatch).
    absent: list[int]
    #: Per rank: when its kernel started (µs on the job's time axis; None without clocks),
    #: its kernel's duration and its wait for the last arrival (µs).
    arrival_us: dict[int, float | None]
    dur_us: dict[int, float]
    wait_us: dict[int, float]
    last: int
    #: The last arrival's kernel time: the time the data moved once all were there.
    duration_us: float
    algbw_gbps: float | None
    busbw_gbps: float | None
    peak_gbps: float | None
    basis: dict[str, Basis] = field(default_factory=dict)
    #: Per rank, the row of its collectives table (not serialised).
    rows: dict[int, int] = field(default_factory=dict, repr=False)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("rows")
        for k in ("arrival_us", "dur_us", "wait_us"):
            d[k] = {str(r): v for r, v in d[k].items()}
        d["basis"] = {k: {"kind": b.kind, "how": b.how} for k, b in self.basis.items()}
        return d


@dataclass
class Straggler:
    rank: int
    last_count: int
    collective_count: int
    #: µs the other ranks waited for it, and that per waiting rank as a share of the
    #: median rank's GPU span.
    caused_wait_us: float
    caused_wait_pct: float
    #: Its mean time inside a collective kernel, and the other ranks' (it waits least).
    mean_collective_us: float | None
    others_mean_collective_us: float | None
    bottleneck: str
    summary: str
    fix: str
    sentence: str
    #: The part of ``caused_wait_us`` its late start explains: at the first collective it
    #: shares with each peer, as much of that peer's wait as it began its profiled window
    #: after that peer. It brought that lateness into the trace: its cause precedes it.
    inherited_wait_us: float = 0.0
    #: How much later than the first rank to start it began its profiled window (µs; None
    #: without a shared clock), and that rank.
    late_start_us: float | None = None
    first_rank: int | None = None

    @property
    def inherited_share(self) -> float:
        """The share of the waits it caused that its late start explains (0 to 1)."""
        return self.inherited_wait_us / self.caused_wait_us if self.caused_wait_us > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class JobVerdict:
    bottleneck: Bottleneck
    #: What the job loses its time to: "skew", "exposed_communication", or the stall /
    #: per-rank verdict that decided.
    cause: str
    summary: str
    fixes: list[str]
    confidence: Confidence = "high"
    #: A rank verdict's basis, or "skew_wait": ranks waiting on the slowest one decided.
    basis: VerdictBasis | Literal["skew_wait"] = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class JobDiagnosis:
    """The result of analysing a job's ranks together (see the module's docstring)."""

    source: str
    world_size: int | None
    backend: str | None
    ranks: list[RankRow]
    #: Ranks the job has no analysis of: {"rank", "path", "reason"}.
    missing: list[dict[str, Any]]
    stragglers: list[Straggler]
    collectives: list[CollectiveRow]
    skew: dict[str, Any]
    verdict: JobVerdict
    findings: list[Finding]
    #: The job's GPU time (all ranks' spans) cut into shares (%), exposed communication
    #: split into ``skew_wait`` and ``transfer``.
    breakdown: dict[str, float]
    #: Whether ranks share one time axis (every file has wall-clock timestamps).
    clock: Basis
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The ``job`` section of ``nbprof analyze --json``."""
        return {
            "world_size": self.world_size,
            "backend": self.backend,
            "ranks": [r.to_json() for r in self.ranks],
            "missing": list(self.missing),
            "stragglers": [s.to_json() for s in self.stragglers],
            "collectives": [c.to_json() for c in self.collectives],
            "skew": self.skew,
            "verdict": self.verdict.to_json(),
            "breakdown": self.breakdown,
            "clock": {"kind": self.clock.kind, "how": self.clock.how},
            "notes": list(self.notes),
        }


# -- the analysis ------------------------------------------------------------------------


def analyze_job(
    summaries: list[RankSummary],
    failures: list[RankFailure] | None = None,
    *,
    source: str = "",
    forced: bool = False,
) -> JobDiagnosis:
    """The job made of these ranks. ``failures`` are rank files that could not be analysed
    (named in ``missing``); ``forced``: the caller said the files are one job, so ranks are
    numbered by file order where the files do not number them apart."""
    failures = list(failures or [])
    if not summaries:
        raise NotOneJob(source or None, "no rank of the job could be analysed")
    notes: list[str] = []
    ranks = _numbering(summaries, forced, notes)
    info = summaries[0].info
    claimed = info.get("world_size")
    world = _int(claimed)
    if world is None and isinstance(claimed, int) and not isinstance(claimed, bool):
        notes.append(f"distributedInfo's world_size ({claimed:,}) is no rank count: ignored")
    backend = info.get("backend") if isinstance(info.get("backend"), str) else None
    believed = believed_world(world, len(summaries) + len(failures))
    missing = _missing(ranks, summaries, failures, world)
    shifts, clock = _clock(summaries)
    records = [s.collectives for s in summaries]
    colls = _match(summaries, records, ranks, shifts, believed, notes)
    per_rank = _per_rank(summaries, records, ranks, colls)
    median_span = float(np.median([s.metrics.gpu_span_us for s in summaries if s.device]))
    # Each rank's first event on the job's time axis (shifts: one per summary).
    starts = [
        (sh + s.window[0]) if sh is not None else None
        for sh, s in zip(shifts, summaries, strict=True)
    ]
    stragglers = _stragglers(summaries, ranks, colls, per_rank, median_span, starts)
    rows = [_row(s, ranks[i], starts[i], per_rank[ranks[i]]) for i, s in enumerate(summaries)]
    rows.sort(key=lambda r: r.rank)
    skew = _skew(summaries, ranks, shifts)
    breakdown = _breakdown(summaries, ranks, per_rank)
    verdict = _verdict(summaries, ranks, breakdown, stragglers, colls)
    findings = _findings(breakdown, stragglers, skew, colls, verdict)
    if missing:
        notes.append(
            "analysed without " + "; ".join(describe_missing(m, note=True) for m in missing)
        )
    if world is not None and believed is None:
        notes.append(
            f"distributedInfo says the world has {world:,} ranks, far more than the "
            f"{len(summaries) + len(failures)} rank files given: the ranks without a file are "
            "counted, not listed"
        )
    return JobDiagnosis(
        source=source,
        world_size=world,
        backend=backend,
        ranks=rows,
        missing=missing,
        stragglers=stragglers,
        collectives=colls,
        skew=skew,
        verdict=verdict,
        findings=findings,
        breakdown=breakdown,
        clock=clock,
        notes=notes,
    )


def _numbering(summaries: list[RankSummary], forced: bool, notes: list[str]) -> list[int]:
    said = [_int(s.info.get("rank")) for s in summaries]
    if all(r is not None for r in said) and len(set(said)) == len(said):
        return [int(r) for r in said if r is not None]
    if not forced:
        why = check(summaries) or "the files do not number their ranks apart"
        raise NotOneJob(None, f"not one job: {why}")
    notes.append(
        "the files do not give each rank its own number (distributedInfo): ranks are numbered "
        "by the order of the file names"
    )
    return list(range(len(summaries)))


def believed_world(world: int | None, files: int) -> int | None:
    """The world size taken as true: the one the files name, where it is at most
    :data:`BELIEVED_MARGIN` ranks more than the ``files`` given; None otherwise.

    A world size is a number in a file, not a measurement: ranks beyond what could plausibly
    be missing size no list and no loop (a billion-rank claim in two small files would
    otherwise cost gigabytes). What it claims is still reported, in one line."""
    if world is None or world <= 0:
        return None
    return world if world <= files + BELIEVED_MARGIN else None


def _missing(
    ranks: list[int], summaries: list[RankSummary], failures: list[RankFailure], world: int | None
) -> list[dict[str, Any]]:
    """What the job lacks: one entry per unreadable file, and one per run of consecutive
    ranks below ``world`` that no file holds (``rank`` to ``last``, ``count`` of them).

    Worked out from the ranks present alone: as many runs as files at most, however large
    the world the files claim."""
    out: list[dict[str, Any]] = []
    runs = _absent_runs(ranks, world or 0)
    n_absent = sum(b - a + 1 for a, b in runs)
    unknown = [f for f in failures if f.rank is None]
    for f in failures:
        rank = f.rank
        # An unreadable file cannot say its rank; with one rank short and one such file,
        # that file was that rank.
        if rank is None and len(unknown) == 1 and n_absent == 1:
            rank = runs[0][0]
        out.append({"rank": rank, "path": f.path, "reason": f.reason})
    claimed = {m["rank"] for m in out if m["rank"] is not None}
    for a, b in runs:
        for first, last in _without(a, b, claimed):
            many = last > first
            if unknown:
                reason = "no analysed file (it may be one of the unreadable files)"
            else:
                reason = f"no trace file for {'these ranks' if many else 'this rank'}"
            out.append(
                {"rank": first, "last": last, "count": last - first + 1, "path": None,
                 "reason": reason}
            )  # fmt: skip
    return out


def _absent_runs(ranks: list[int], world: int) -> list[tuple[int, int]]:
    """The runs (first, last) of ranks in ``range(world)`` not in ``ranks``."""
    runs: list[tuple[int, int]] = []
    at = 0
    for r in sorted({r for r in ranks if 0 <= r < world}):
        if r > at:
            runs.append((at, r - 1))
        at = r + 1
    if at < world:
        runs.append((at, world - 1))
    return runs


def _without(a: int, b: int, taken: set[int]) -> list[tuple[int, int]]:
    """The run a..b cut around the ranks in ``taken`` (as many pieces as ``taken`` has)."""
    pieces: list[tuple[int, int]] = []
    for t in sorted(x for x in taken if a <= x <= b):
        if t > a:
            pieces.append((a, t - 1))
        a = t + 1
    if a <= b:
        pieces.append((a, b))
    return pieces


def describe_missing(m: dict[str, Any], *, note: bool = False) -> str:
    """One line for one entry of :attr:`JobDiagnosis.missing`: "rank 3 (rank3.json): why",
    or "ranks 8-999999 missing: 999,992 ranks (why)" ("ranks 8-999999 (999,992 ranks:
    why)" inside a note that says what they are)."""
    count = int(m.get("count", 1))
    if m.get("path") is None and count > 1:
        span = f"ranks {m['rank']}-{m['last']}"
        if note:
            return f"{span} ({count:,} ranks: {m['reason']})"
        return f"{span} missing: {count:,} ranks ({m['reason']})"
    who = f"rank {m['rank']}" if m["rank"] is not None else "rank ?"
    where = f" ({plain_text(_name(m['path']))})" if m.get("path") else ""
    if note:
        return f"{who}{where} ({m['reason']})"
    return f"{who}{where}: {m['reason']}"


def _clock(summaries: list[RankSummary]) -> tuple[list[float | None], Basis]:
    origins = [s.origin_ns for s in summaries]
    if any(o is None for o in origins):
        return [None] * len(summaries), Basis(
            "unknown",
            "some rank files have no wall-clock timestamps, so ranks cannot be placed on one "
            "time axis: waits are estimated from the collectives' durations",
        )
    base = min(o for o in origins if o is not None)
    shifts: list[float | None] = [(o - base) / 1000.0 for o in origins if o is not None]
    return shifts, Basis(
        "trace",
        "the ranks' wall-clock timestamps; ranks on one host share its clock, across hosts "
        "the clocks' offset adds to every arrival",
    )


@dataclass
class _Call:
    rank: int
    i: int  # summary index
    row: int  # row in its collectives table


def _match(
    summaries: list[RankSummary],
    records: list[list[dict[str, Any]]],
    ranks: list[int],
    shifts: list[float | None],
    world: int | None,
    notes: list[str],
) -> list[CollectiveRow]:
    # Sequence numbers decide for a group only when every rank's calls on it carry them.
    seq_ok: dict[str, bool] = {}
    for rows in records:
        for row in rows:
            pg = row["pg"]
            if pg != pg:  # a missing group (NaN) forms no group, as in a groupby
                continue
            seq_ok[str(pg)] = seq_ok.get(str(pg), True) and int(row["seq"]) >= 0
    groups: dict[tuple[Any, ...], list[_Call]] = {}
    for i, rows in enumerate(records):
        for j, row in enumerate(rows):
            pg = str(row["pg"])
            kind = row["kind"]
            if seq_ok.get(pg, False):
                key: tuple[Any, ...] = ("seq", pg, kind in P2P_KINDS, int(row["seq"]))
            else:
                key = ("order", pg, kind, int(row["order"]))
            groups.setdefault(key, []).append(_Call(ranks[i], i, j))
    # ``world`` is believed_world's: at most the files plus a margin.
    everyone = sorted(set(ranks) | set(range(world or 0)))
    out: list[CollectiveRow] = []
    for key, calls in groups.items():
        out.append(_collective(key, calls, summaries, records, shifts, everyone))
    # _clocked: every arrival is known, so the filter drops nothing.
    out.sort(key=lambda c: (min(v for v in c.arrival_us.values() if v is not None)
                            if _clocked(c) else 0.0,
                            c.pg, c.kind, c.order))  # fmt: skip
    for n, c in enumerate(out):
        c.index = n
    uneven = [c for c in out if c.absent]
    if uneven:
        notes.append(
            f"{len(uneven)} of {len(out)} collectives lack a record on some member rank "
            "(a rank file is missing, or the ranks did not record the same calls): their last "
            "arrival is the last among the ranks that have one"
        )
    return out


def _clocked(c: CollectiveRow) -> bool:
    return all(v is not None for v in c.arrival_us.values())


def _collective(
    key: tuple[Any, ...],
    calls: list[_Call],
    summaries: list[RankSummary],
    records: list[list[dict[str, Any]]],
    shifts: list[float | None],
    everyone: list[int],
) -> CollectiveRow:
    rows = [records[c.i][c.row] for c in calls]
    rks = [c.rank for c in calls]
    ts = np.array([float(r["ts"]) for r in rows])
    dur = np.array([float(r["dur"]) for r in rows])
    shift = [shifts[c.i] for c in calls]
    clocked = all(s is not None for s in shift)
    basis: dict[str, Basis] = {}
    if clocked:
        arrive = ts + np.array([float(s) for s in shift if s is not None])
        last_i = int(np.argmax(arrive))
        wait = np.clip(arrive[last_i] - arrive, 0.0, dur)
        basis["wait_us"] = Basis(
            "trace", "last arrival's kernel start − this rank's (at most its kernel's time)"
        )
    else:
        arrive = None
        last_i = int(np.argmin(dur))
        wait = np.clip(dur - dur[last_i], 0.0, None)
        basis["wait_us"] = Basis(
            "estimated", "this rank's kernel time − the shortest one's (no shared clock)"
        )
    first = rows[0]
    kind = str(first["kind"])
    group_ranks = tuple(first["group_ranks"]) if len(first["group_ranks"]) else ()
    members = list(group_ranks) if group_ranks else everyone
    sizes = [int(r["group_size"]) for r in rows if int(r["group_size"]) > 0]
    n = sizes[0] if sizes else len(members)
    lacking = set(members) - set(rks)
    if len(lacking) > len(everyone) + BELIEVED_MARGIN:
        # A group the trace says is larger than the job could be: only members the job
        # knows of are named (a list per collective would otherwise grow with the claim).
        lacking &= set(everyone)
    absent = sorted(lacking)
    nbytes = max((int(r["bytes"]) for r in rows), default=-1)
    size_from = next((str(r["size_from"]) for r in rows if int(r["bytes"]) == nbytes), "")
    duration = float(dur[last_i])
    algbw = busbw = None
    if nbytes >= 0 and duration > 0:
        # Bytes per µs are MB/s: a thousandth of that is GB/s.
        algbw = nbytes / duration / 1e3
        factor = bus_factor(kind, n)
        busbw = algbw * factor if factor is not None else None
        basis["algbw_gbps"] = Basis(
            "trace", f"S ÷ the last arrival's kernel time; S from {size_from}"
        )
        basis["busbw_gbps"] = (
            Basis("trace", f"algbw × NCCL's factor for {kind} over {n} ranks ({factor:.3g})")
            if factor is not None
            else Basis("unknown", f"NCCL's performance notes give no bus factor for {kind}")
        )
    else:
        why = "the trace records no message size for this call" if nbytes < 0 else "zero time"
        basis["algbw_gbps"] = basis["busbw_gbps"] = Basis("unknown", why)
    m = summaries[calls[0].i]
    dev = m.metrics if m.device else None
    peak, pb = link_peak(dev.name if dev else "", None, n)
    basis["peak_gbps"] = pb
    order_rank = np.argsort(rks)
    return CollectiveRow(
        index=0,
        kind=kind,
        pg=str(first["pg"]),
        seq=int(first["seq"]) if key[0] == "seq" else -1,
        order=int(first["order"]),
        name=str(first["name"]),
        bytes=nbytes if nbytes >= 0 else None,
        size_from=size_from,
        group_size=n,
        ranks=sorted(rks),
        absent=absent,
        arrival_us={rks[j]: (float(arrive[j]) if arrive is not None else None) for j in order_rank},
        dur_us={rks[j]: float(dur[j]) for j in order_rank},
        wait_us={rks[j]: float(wait[j]) for j in order_rank},
        last=rks[last_i],
        duration_us=duration,
        algbw_gbps=algbw,
        busbw_gbps=busbw,
        peak_gbps=peak,
        basis=basis,
        rows={c.rank: c.row for c in calls},
    )


@dataclass
class _RankStats:
    last: int = 0
    count: int = 0
    caused_us: float = 0.0
    wait_us: float = 0.0
    exposed_wait_us: float = 0.0
    in_collectives_us: float = 0.0


def _per_rank(
    summaries: list[RankSummary],
    records: list[list[dict[str, Any]]],
    ranks: list[int],
    colls: list[CollectiveRow],
) -> dict[int, _RankStats]:
    stats = {r: _RankStats() for r in ranks}
    index = {r: i for i, r in enumerate(ranks)}
    for c in colls:
        if len(c.ranks) >= 2:
            for r in c.ranks:
                stats[r].count += 1
            stats[c.last].last += 1
            stats[c.last].caused_us += sum(w for r, w in c.wait_us.items() if r != c.last)
        for r in c.ranks:
            st = stats[r]
            st.in_collectives_us += c.dur_us[r]
            w = c.wait_us[r]
            st.wait_us += w
            if w <= 0:
                continue
            row = records[index[r]][c.rows[r]]
            a = float(row["ts"])
            hidden = iv.total(iv.intersect(row["covered"], (np.array([a]), np.array([a + w]))))
            st.exposed_wait_us += w - hidden
    # A rank's exposed wait is part of its exposed communication: never more than it.
    for i, s in enumerate(summaries):
        if not s.device:
            continue
        m = s.metrics
        cap = (m.exposed_comm_pct or 0.0) / 100.0 * m.gpu_span_us
        st = stats[ranks[i]]
        st.exposed_wait_us = min(st.exposed_wait_us, cap)
    return stats


def _stragglers(
    summaries: list[RankSummary],
    ranks: list[int],
    colls: list[CollectiveRow],
    stats: dict[int, _RankStats],
    median_span: float,
    starts: list[float | None],
) -> list[Straggler]:
    """The ranks the others wait for (see the module's docstring). ``starts``: each rank's
    first event on the job's time axis (None without a clock)."""
    n = len(ranks)
    start_of = dict(zip(ranks, starts, strict=True))
    if n < 2 or median_span <= 0:
        return []
    out: list[Straggler] = []
    for i, r in enumerate(ranks):
        st = stats[r]
        per_peer = st.caused_us / (n - 1)
        pct = per_peer / median_span * 100.0
        if st.last == 0 or pct < FINDING_STALL_PCT:
            continue
        s = summaries[i]
        mine = [c.dur_us[r] for c in colls if r in c.dur_us and len(c.ranks) >= 2]
        others = [d for c in colls if len(c.ranks) >= 2 for rr, d in c.dur_us.items() if rr != r]
        fix = _rank_fix(s)
        kinds = Counter(c.kind for c in colls if c.last == r and len(c.ranks) >= 2)
        of_kind = Counter(c.kind for c in colls if len(c.ranks) >= 2 and r in c.ranks)
        words = ", ".join(
            f"{kinds[k]} of {of_kind[k]} {_plural(k)}"
            for k in sorted(kinds, key=lambda k: -kinds[k])
        )
        label = s.verdict.bottleneck.replace("_", "-")
        inherited = _inherited(r, colls, start_of)
        known = [(v, rr) for rr, v in start_of.items() if v is not None]
        mine_start = start_of.get(r)
        late_by, first = None, None
        if mine_start is not None and len(known) == len(start_of):
            v0, first = min(known)
            late_by = mine_start - v0
        came = ""
        if st.caused_us > 0 and inherited >= INHERITED_SHARE * st.caused_us and late_by:
            came = (
                f", {_pct(inherited / st.caused_us * 100.0)} of it because it started its "
                f"profiled window {_us(late_by)} after rank {first} (what delayed it precedes "
                f"the trace)"
            )
        sentence = (
            f"rank {r} arrives last at {words}; the others wait {_us(per_peer)} each for it "
            f"({_pct(pct)} of the median span){came}; it is {label}: "
            f"{_first_clause(s.verdict.summary)}"
        )
        out.append(
            Straggler(
                rank=r,
                last_count=st.last,
                collective_count=st.count,
                caused_wait_us=st.caused_us,
                caused_wait_pct=pct,
                mean_collective_us=float(np.mean(mine)) if mine else None,
                others_mean_collective_us=float(np.mean(others)) if others else None,
                bottleneck=s.verdict.bottleneck,
                summary=s.verdict.summary,
                fix=fix,
                sentence=sentence,
                inherited_wait_us=inherited,
                late_start_us=late_by,
                first_rank=first,
            )
        )
    out.sort(key=lambda s: -s.caused_wait_us)
    return out


#: A straggler's late start is named when it explains at least this share of the waits
#: it caused; from half on, it is what the waits mostly are (:func:`_late_start_fix`).
INHERITED_SHARE = 0.25


def _inherited(r: int, colls: list[CollectiveRow], start_of: dict[int, float | None]) -> float:
    """The waits rank ``r`` caused that its late start explains: for each peer, at the
    first collective the two share (in time order), as much of the peer's wait there as
    ``r`` began its window after the peer, when ``r`` was that collective's last arrival.
    From there on the peer had waited for it: the two ran in step, and later waits were
    gained inside the trace. Collectives are in time order (:func:`_match`)."""
    mine = start_of.get(r)
    if mine is None:
        return 0.0
    met: set[int] = set()
    out = 0.0
    for c in colls:
        if r not in c.ranks or len(c.ranks) < 2 or not _clocked(c):
            continue
        for p in c.ranks:
            if p == r or p in met:
                continue
            met.add(p)
            theirs = start_of.get(p)
            if c.last == r and theirs is not None:
                out += min(c.wait_us.get(p, 0.0), max(0.0, mine - theirs))
    return out


def _late_start_fix(s: Straggler) -> str:
    """The fix when a straggler's late start is most of the waits it caused: the trace
    cannot show why, a longer one can."""
    if s.inherited_share < 0.5 or not s.late_start_us:
        return ""
    return (
        f"Profile several steps in a row (torch.profiler.schedule(wait=1, warmup=1, "
        f"active=3)): rank {s.rank} started this one {_us(s.late_start_us)} after rank "
        f"{s.first_rank}, and what delayed it (the step before, data loading, a checkpoint "
        f"or an evaluation on that rank) lies before this trace."
    )


def _plural(kind: str) -> str:
    return {
        "all_reduce": "all-reduces",
        "all_gather": "all-gathers",
        "reduce_scatter": "reduce-scatters",
        "all_to_all": "all-to-alls",
        "broadcast": "broadcasts",
        "reduce": "reduces",
        "send_recv": "sends/receives",
        "gather": "gathers",
        "scatter": "scatters",
        "barrier": "barriers",
    }.get(kind, "collectives")


def _first_clause(summary: str) -> str:
    """A rank verdict's first reason, without its device prefix ("Tesla V100 (rank 5): ")
    and the supporting numbers after it."""
    head = summary.split(". ", 1)[0]
    text = head.split(": ", 1)[1] if ": " in head else head
    return text.split("; ", 1)[0].rstrip(".") + "."


def _rank_fix(s: RankSummary) -> str:
    """The fix of the rank's own bottleneck: its most severe finding that is not the
    exposed communication itself (which, on a straggler, is the others' symptom)."""
    for f in s.findings:
        if f.id != "communication" and f.fix:
            return f.fix
    return ""


def _row(s: RankSummary, rank: int, start: float | None, st: _RankStats) -> RankRow:
    m: DeviceMetrics | None = s.metrics if s.device else None
    sb = m.span_breakdown if m else {}
    span = m.gpu_span_us if m else 0.0
    # The steps' columns as plain values: iterating a Series costs more than the rest here.
    step_no, dur, exposed = (
        _frames.column(s.steps, c).tolist() for c in ("step", "dur", "exposed_comm_us")
    )
    return RankRow(
        rank=rank,
        path=s.path,
        device=s.device,
        device_name=m.name if m else "",
        gpu_span_us=span,
        kernel_busy_pct=m.kernel_busy_pct if m else None,
        compute_busy_pct=sb.get("compute") if m else None,
        exposed_comm_pct=m.exposed_comm_pct if m else None,
        wait_pct=st.exposed_wait_us / span * 100.0 if span > 0 else None,
        idle={k: v for k, v in sb.items() if k not in RAN},
        steps={int(a): float(b) for a, b in zip(step_no, dur, strict=True)},
        step_exposed_comm_us={int(a): float(b) for a, b in zip(step_no, exposed, strict=True)},
        start_us=start,
        bottleneck=s.verdict.bottleneck,
        summary=s.verdict.summary,
        last_count=st.last,
        collective_count=st.count,
        caused_wait_us=st.caused_us,
    )


def _skew(
    summaries: list[RankSummary], ranks: list[int], shifts: list[float | None]
) -> dict[str, Any]:
    """Per ProfilerStep: each rank's duration, the spread, who was slowest; and how far
    apart the ranks started."""
    rows = []
    for i, s in enumerate(summaries):
        if s.steps.empty:
            continue
        sh = shifts[i]
        cols = (_frames.column(s.steps, c).tolist() for c in ("step", "dur", "ts"))
        for step, dur, ts in zip(*cols, strict=True):
            rows.append(
                {
                    "rank": ranks[i],
                    "step": int(step),
                    "dur": float(dur),
                    "start": float(ts) + sh if sh is not None else np.nan,
                }
            )
    steps = []
    if rows:
        df = pd.DataFrame(rows)
        for step, g in df.groupby("step", sort=True):
            if len(g) < 2:
                continue
            d = g["dur"].to_numpy()
            st = g["start"].to_numpy()
            end = st + d
            slow = int(g["rank"].to_numpy()[int(np.argmax(d))])
            fast = int(g["rank"].to_numpy()[int(np.argmin(d))])
            clocked = not np.isnan(st).any()
            steps.append(
                {
                    "step": int(step),
                    "ranks": len(g),
                    "min_us": float(d.min()),
                    "median_us": float(np.median(d)),
                    "max_us": float(d.max()),
                    "spread_us": float(d.max() - d.min()),
                    "spread_pct": float((d.max() - d.min()) / np.median(d) * 100.0)
                    if np.median(d) > 0
                    else None,
                    "slowest_rank": slow,
                    "fastest_rank": fast,
                    "start_spread_us": float(st.max() - st.min()) if clocked else None,
                    "end_spread_us": float(end.max() - end.min()) if clocked else None,
                }
            )
    starts = [sh + s.window[0] for i, s in enumerate(summaries) if (sh := shifts[i]) is not None]
    start_spread = float(max(starts) - min(starts)) if len(starts) == len(summaries) > 1 else None
    first = last = None
    if start_spread is not None:  # every rank's shift is known: starts holds them all, in order
        first, last = ranks[int(np.argmin(starts))], ranks[int(np.argmax(starts))]
    return {
        "steps": steps,
        "start_spread_us": start_spread,
        "first_to_start": first,
        "last_to_start": last,
    }


def _breakdown(
    summaries: list[RankSummary], ranks: list[int], stats: dict[int, _RankStats]
) -> dict[str, float]:
    """The job's GPU time (every rank's span) cut as each span is, in %."""
    total = 0.0
    acc: dict[str, float] = {}
    wait = 0.0
    for i, s in enumerate(summaries):
        if not s.device:
            continue
        m = s.metrics
        total += m.gpu_span_us
        for k, v in m.span_breakdown.items():
            acc[k] = acc.get(k, 0.0) + v / 100.0 * m.gpu_span_us
        wait += stats[ranks[i]].exposed_wait_us
    if total <= 0:
        return {}
    out = {k: v / total * 100.0 for k, v in acc.items()}
    exposed = out.get("exposed_comm", 0.0)
    out["skew_wait"] = min(wait / total * 100.0, exposed)
    out["transfer"] = max(exposed - out["skew_wait"], 0.0)
    return out


def _verdict(
    summaries: list[RankSummary],
    ranks: list[int],
    bd: dict[str, float],
    stragglers: list[Straggler],
    colls: list[CollectiveRow],
) -> JobVerdict:
    usable = [s for s in summaries if s.device]
    if not usable or not bd:
        busiest = summaries[0]
        return JobVerdict(
            busiest.verdict.bottleneck, busiest.verdict.basis or "none",
            "No rank ran GPU work: " + busiest.verdict.summary, [], busiest.verdict.confidence,
            busiest.verdict.basis,
        )  # fmt: skip
    # The communication share (collectives alone, and idle time queued behind one) and
    # every other stall, compared as they are: the largest decides.
    stalls = shares_of(bd)
    (key, share), (key2, share2) = list(stalls.items())[:2]
    n = len(usable)
    exposed, wait, transfer = (
        bd.get("exposed_comm", 0.0),
        bd.get("skew_wait", 0.0),
        bd.get("transfer", 0.0),
    )
    fixes: list[str] = []
    skew_fix = ""
    if stragglers:
        s = stragglers[0]
        own = f": {s.fix[0].lower()}{s.fix[1:]}" if s.fix else "."
        skew_fix = (
            f"Balance the slow rank's work. Rank {s.rank} is {s.bottleneck.replace('_', '-')}"
            f"{own} Or give it less work (uneven data shards, embedding tables or pipeline "
            "stages), or find what else runs on its host."
        )
    overlap_fix = (
        "Overlap the collectives with compute and send fewer, larger ones: DDP overlaps "
        "gradient all-reduce with backward when its buckets fill early (bucket_cap_mb, "
        "gradient_as_bucket_view=True), FSDP prefetches the next all-gather "
        "(forward_prefetch, backward_prefetch), all-to-alls can run on a side stream; where "
        "bus bandwidth is far below the link's peak, the calls are too small to fill it."
    )
    where = f"of the job's GPU time ({n} ranks' spans together)"
    if share >= STALL_PCT and key == "exposed_comm":
        if wait >= transfer and stragglers:
            s = stragglers[0]
            summary = (
                f"Communication-bound because of skew: collectives ran with nothing beside "
                f"them for {_pct(exposed)} {where}, {_pct(wait)} of it spent waiting for a "
                f"later rank. {s.sentence[0].upper()}{s.sentence[1:]}"
            )
            # A straggler that is late mostly because it started late is not balanced by
            # moving its work: what held it back is before the trace.
            late_fix = _late_start_fix(s)
            fixes.extend([late_fix, skew_fix] if late_fix else [skew_fix])
            if transfer >= FINDING_STALL_PCT:
                fixes.append(overlap_fix)
            return JobVerdict("communication_bound", "skew", summary, fixes, "high", "skew_wait")
        summary = (
            f"Communication-bound because of exposed communication: collectives ran with "
            f"nothing beside them for {_pct(exposed)} {where}, {_pct(transfer)} of it moving "
            f"data once every rank had arrived (waits for late ranks: {_pct(wait)})."
        )
        fixes.append(overlap_fix)
        if wait >= FINDING_STALL_PCT and skew_fix:
            fixes.append(skew_fix)
        conf: Confidence = "low" if wait >= 0.75 * transfer else "high"
        return JobVerdict(
            "communication_bound", "exposed_communication", summary, fixes, conf,
            "exposed_communication",
        )  # fmt: skip
    if share >= STALL_PCT:
        kind, basis, what = STALLS[key]
        busiest = max(usable, key=lambda s: s.metrics.span_breakdown.get(key, 0.0))
        kind = busiest.verdict.bottleneck if key == "host" else kind
        summary = (
            f"{kind.replace('_', '-').capitalize()} across the job: for {_pct(share)} {where} "
            f"{what}; the largest share is on rank {busiest.rank} "
            f"({_pct(busiest.metrics.span_breakdown.get(key, 0.0))} of its span)."
        )
        confidence: Confidence = "high"
        late = stragglers[0] if stragglers else None
        # Waits worth a finding, mostly for a rank that began its window late: the trace
        # cannot say why, a longer one can.
        late_fix = _late_start_fix(late) if late and wait >= FINDING_STALL_PCT else ""
        if key2 == "exposed_comm" and share2 >= CLOSE_CALL * share:
            if late is not None and wait >= transfer and late.inherited_share >= 0.5:
                # Most of the waiting is for a rank that began its window late: that
                # lateness came into the trace, its cause is before it; what the trace
                # holds of the job is this stall. Close only if that unexplained part of
                # the waits comes near this stall's share.
                unexplained = wait * late.inherited_share
                if unexplained >= CLOSE_CALL * share:
                    confidence = "low"
                summary += (
                    f" Collectives ran alone for {_pct(exposed)} of the job's GPU time, "
                    f"{_pct(wait)} of it waiting for a later rank, most of that for a rank "
                    f"that started late:"
                )
            elif late is not None and wait >= transfer and late.bottleneck == kind:
                # The collectives' exposed time is mostly ranks waiting for a rank whose
                # own limit is this one, gained inside the trace: it is this stall's cost,
                # seen at the collectives.
                summary += (
                    f" Collectives ran alone for {_pct(exposed)} of the job's GPU time, "
                    f"{_pct(wait)} of the job's GPU time waiting for a later rank whose own "
                    f"limit is the same:"
                )
            else:
                confidence = "low"
                summary += (
                    f" A close call: communication takes {_pct(share2)} of the job's GPU time "
                    f"(collectives alone {_pct(exposed)}, waiting for a later rank {_pct(wait)})."
                )
        if stragglers:
            first = stragglers[0].sentence
            summary += f" {first if summary.endswith(':') else first[0].upper() + first[1:]}"
        fix = _rank_fix(busiest)
        fixes = [f for f in (fix, late_fix) if f]
        return JobVerdict(kind, key, summary, fixes, confidence, basis)
    busiest = max(usable, key=lambda s: s.metrics.gpu_span_us * (s.metrics.kernel_busy_pct or 0))
    v = busiest.verdict
    summary = (
        f"No stall covers a quarter of the job's GPU time (largest: {key.replace('_', ' ')} "
        f"{_pct(share)}); the busiest rank, {busiest.rank}, is "
        f"{v.bottleneck.replace('_', '-')}: {_first_clause(v.summary)}"
    )
    fix = _rank_fix(busiest)
    return JobVerdict(
        v.bottleneck, v.bottleneck, summary, [fix] if fix else [], v.confidence, v.basis
    )


def _findings(
    bd: dict[str, float],
    stragglers: list[Straggler],
    skew: dict[str, Any],
    colls: list[CollectiveRow],
    verdict: JobVerdict,
) -> list[Finding]:
    out: list[Finding] = []
    for s in stragglers:
        out.append(
            Finding(
                id="straggler",
                severity="high" if s.caused_wait_pct >= STALL_PCT else "medium",
                title=f"Rank {s.rank} is the straggler the others wait for",
                detail=s.sentence[0].upper() + s.sentence[1:],
                evidence={
                    "rank": s.rank,
                    "last_arrivals": s.last_count,
                    "collectives": s.collective_count,
                    "caused_wait_us": round(s.caused_wait_us, 1),
                    "caused_wait_pct_of_median_span": round(s.caused_wait_pct, 1),
                },
                fix=_late_start_fix(s) or s.fix or "Balance the work across ranks.",
                device=str(s.rank),
            )
        )
    exposed = bd.get("exposed_comm", 0.0)
    if exposed >= FINDING_STALL_PCT:
        sized = [c for c in colls if c.busbw_gbps is not None and c.bytes]
        total_b = sum(c.bytes or 0 for c in sized)
        detail = (
            f"Collectives ran with nothing beside them for {exposed:.1f}% of the job's GPU "
            f"time: {bd.get('skew_wait', 0.0):.1f}% waiting for later ranks, "
            f"{bd.get('transfer', 0.0):.1f}% moving data."
        )
        if sized:
            # The largest call says most about the links: small ones are latency-bound.
            big = max(sized, key=lambda c: c.bytes or 0)
            bus = big.busbw_gbps or 0.0
            detail += (
                f" {len(sized)} collectives moved {total_b / 1e6:.1f} MB; the largest, a "
                f"{(big.bytes or 0) / 1e6:.1f} MB {big.kind.replace('_', '-')}, reached "
                f"{bus:.1f} GB/s bus bandwidth"
                + (
                    f", {bus / big.peak_gbps * 100:.0f}% of the {big.peak_gbps:.0f} GB/s link"
                    if big.peak_gbps
                    else " (link peak unknown)"
                )
                + "."
            )
        out.append(
            Finding(
                id="job_exposed_communication",
                severity="high" if exposed >= STALL_PCT else "medium",
                title="Exposed communication across the job",
                detail=detail,
                evidence={
                    "exposed_comm_pct": round(exposed, 1),
                    "skew_wait_pct": round(bd.get("skew_wait", 0.0), 1),
                    "transfer_pct": round(bd.get("transfer", 0.0), 1),
                },
                fix=verdict.fixes[0] if verdict.fixes else "",
            )
        )
    spread = skew.get("start_spread_us")
    if spread:
        out.append(
            Finding(
                id="rank_start_skew",
                severity="info",
                title="Ranks started their profiled window at different times",
                detail=(
                    f"Rank {skew['last_to_start']} started {_us(spread)} after rank "
                    f"{skew['first_to_start']}; step durations that include that start differ "
                    "by as much even when the ranks end together."
                ),
                evidence={"start_spread_us": round(spread, 1)},
                fix=(
                    "Compare the ranks' step ends, or profile a later step, where they are in step."
                ),
            )
        )
    return out
