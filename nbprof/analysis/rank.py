"""What one rank's analysis returns inside a job: small, serialisable, trace-free.

:func:`summarize` reads a rank's :class:`~nbprof.trace.model.Trace` once and keeps what the
job analysis (:mod:`nbprof.analysis.job`) and the job's views need: the rank's own
diagnosis (its devices' metrics, verdict and findings, with the small tables of its panel),
its ProfilerSteps, its collectives and a capped sample of its timeline. This is the unit a
worker process or a Dask worker sends back, so it never holds the trace: a summary is a few
kB to a few hundred kB whatever the size of the rank's file.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from nbprof.analysis import _frames, _group, analyze_signals
from nbprof.analysis import intervals as iv
from nbprof.analysis._sent import PackedWhenSent
from nbprof.analysis._text import text_column
from nbprof.analysis.collectives import as_rows, rank_collectives
from nbprof.analysis.device import Signals
from nbprof.analysis.model import DeviceMetrics, Diagnosis, Finding, Verdict
from nbprof.analysis.verdict import primary
from nbprof.trace.model import Trace

logger = logging.getLogger(__name__)

#: Rows of the panel's tables a summary keeps (the panel shows fewer).
KEEP_ROWS = 50
#: Timeline events a rank keeps when the caller gives no cap.
TIMELINE_CAP = 5000
_TIMELINE_COLUMNS = ("device", "stream", "name", "ts", "dur", "kind", "cls")


@dataclass
class RankSummary(PackedWhenSent):
    """One rank of a job, as its analysis saw it. Times are µs from the rank's own first
    event; ``origin_ns`` is that event's wall-clock time (None when the file's clock is not
    the wall clock, and then ranks cannot be placed on one time axis)."""

    path: str
    #: ``distributedInfo`` of the file ({} when it has none).
    info: dict[str, Any]
    #: The rank number the trace's tables use (``info["rank"]`` when the file says it).
    rank: int
    origin_ns: int | None
    #: First and last event of any kind on the rank.
    window: tuple[float, float]
    #: The rank's own diagnosis, its tables cut to their first :data:`KEEP_ROWS` rows
    #: (``kernel_class`` dropped: it is one row per kernel).
    diagnosis: Diagnosis
    #: The device the job's numbers are read from: the one that ran the most kernel time.
    device: str
    #: Its ProfilerSteps: step, name, ts, dur, exposed_comm_us (time a collective ran with
    #: no compute kernel beside it, the rank's own ``exposed_comm_pct`` per step), compute_us.
    steps: pd.DataFrame
    #: Its collective kernels, one dict per call with the keys of
    #: :data:`nbprof.analysis.collectives.COLUMNS` (:func:`~nbprof.analysis.collectives.as_rows`).
    collectives: list[dict[str, Any]]
    #: At most ``cap`` of its GPU events (collectives first, then the longest): device,
    #: stream, name, ts, dur, kind ("kernel", "memcpy", "memset"), cls.
    timeline: pd.DataFrame
    #: GPU events the rank ran in all (``timeline`` holds at most the cap of them).
    gpu_events: int
    notes: list[str] = field(default_factory=list)

    # What a worker sends back: the frames go as their arrays (:mod:`._sent`).
    _SENT_FRAMES = ("steps", "timeline")

    @property
    def metrics(self) -> DeviceMetrics:
        """The metrics of :attr:`device`."""
        return next(d for d in self.diagnosis.devices if d.device == self.device)

    @property
    def verdict(self) -> Verdict:
        return self.diagnosis.verdict

    @property
    def findings(self) -> list[Finding]:
        return self.diagnosis.findings

    @property
    def device_names(self) -> list[str]:
        return sorted({d.name for d in self.diagnosis.devices if d.name})


@dataclass
class RankFailure:
    """A rank file that could not be analysed, and why (in the user's words)."""

    path: str
    reason: str
    #: The rank it was, when known (the file named it, or the job's numbering implies it).
    rank: int | None = None


def summarize(trace: Trace, path: str, *, cap: int = TIMELINE_CAP) -> RankSummary:
    """The summary of the one-rank ``trace`` read from ``path``."""
    diag, signals = analyze_signals(trace)
    meta = trace.metadata if isinstance(trace.metadata, dict) else {}
    info = meta.get("distributedInfo")
    info = dict(info) if isinstance(info, dict) else {}
    rank = _first_rank(trace)
    if signals:
        top = primary(signals)
        device = top.metrics.device
        compute, comm = _sets(top)
        steps = _steps(top, compute, comm)
        colls = as_rows(
            rank_collectives(
                top.view.k,
                top.view.collective,
                compute,
                top.view.runtime,
                _frames.rank_rows(trace.comms, rank),
            )
        )
    else:
        device = ""
        steps = pd.DataFrame({"step": [], "name": [], "ts": [], "dur": [],
                              "exposed_comm_us": [], "compute_us": []})  # fmt: skip
        colls = []
    lo, hi = _window(signals)
    slim = Diagnosis(
        source=diag.source,
        devices=diag.devices,
        verdict=diag.verdict,
        findings=diag.findings,
        tables={name: _head(t) for name, t in diag.tables.items() if name != "kernel_class"},
        explanation=diag.explanation,
    )
    timeline, n_events = _timeline(trace, diag, cap)
    return RankSummary(
        path=path,
        info=info,
        rank=rank,
        origin_ns=trace.origin_ns,
        window=(lo, hi),
        diagnosis=slim,
        device=device,
        steps=steps,
        collectives=colls,
        timeline=timeline,
        gpu_events=n_events,
        notes=list(trace.notes),
    )


def _first_rank(trace: Trace) -> int:
    """``trace.ranks[0]`` (the smallest rank of the kernels, devices and CPU ops; 0 when
    none), from the rank columns' arrays rather than a Series and its distinct values
    for each table."""
    columns = [_frames.column(f, "rank") for f in (trace.kernels, trace.devices, trace.cpu_ops)]
    if not all(type(c) is np.ndarray and c.dtype.kind in "iu" for c in columns):
        return trace.ranks[0]
    return min((int(c.min()) for c in columns if len(c)), default=0)


def _head(t: pd.DataFrame) -> pd.DataFrame:
    """The first ``KEEP_ROWS`` rows, numbered from 0: the table itself when it is that
    already (frames are never modified in place)."""
    if _frames.numbered(t):
        return t if len(t) <= KEEP_ROWS else t.iloc[:KEEP_ROWS]
    return t.head(KEEP_ROWS).reset_index(drop=True)


def _window(signals: list[Signals]) -> tuple[float, float]:
    if not signals:
        return 0.0, 0.0
    lo, hi = zip(*(s.view.window for s in signals), strict=True)
    return float(min(lo)), float(max(hi))


def _sets(s: Signals) -> tuple[iv.Set, iv.Set]:
    """(compute, collectives) of the device as the time accounting cuts them: kernels that
    are not collectives, and collective kernels."""
    k = s.view.k
    ts = _frames.column(k, "ts", "float64")
    end = ts + _frames.column(k, "dur", "float64")
    comm = s.view.collective
    return iv.merge(ts[~comm], end[~comm]), iv.merge(ts[comm], end[comm])


def _steps(s: Signals, compute: iv.Set, comm: iv.Set) -> pd.DataFrame:
    st = s.view.steps
    exposed = iv.subtract(comm, compute)
    cols = ["step", "name", "ts", "dur", "exposed_comm_us", "compute_us"]
    if st.empty:
        return pd.DataFrame([], columns=cols)
    # The steps' fields as plain values (a row tuple at a time costs more than the rest).
    step, name, ts, dur = (_frames.column(st, c).tolist() for c in ("step", "name", "ts", "dur"))
    out: dict[str, list[Any]] = {c: [] for c in cols}
    for k, n, t, d in zip(step, name, ts, dur, strict=True):
        w = (np.array([float(t)]), np.array([float(t + d)]))
        out["step"].append(int(k))
        out["name"].append(str(n))
        out["ts"].append(float(t))
        out["dur"].append(float(d))
        out["exposed_comm_us"].append(iv.total(iv.intersect(exposed, w)))
        out["compute_us"].append(iv.total(iv.intersect(compute, w)))
    types: dict[str, Any] = {"step": "int64", "name": object}
    return _frames.constructed(
        {c: np.array(v, dtype=types.get(c, "float64")) for c, v in out.items()}
    )


def _timeline(trace: Trace, diag: Diagnosis, cap: int) -> tuple[pd.DataFrame, int]:
    """At most ``cap`` GPU events: the collectives first (what a job's timeline is read
    for), then the longest of the rest, in time order."""
    cols: dict[str, list[np.ndarray]] = {c: [] for c in _TIMELINE_COLUMNS}
    cls = diag.kernel_class
    for kind, t in (("kernel", trace.kernels), ("memcpy", trace.memcpy), ("memset", trace.memset)):
        if t.empty:
            continue
        if kind == "kernel" and len(cls) == len(t):
            c = _frames.column(cls, "cls", object)
        else:
            c = np.full(len(t), "copy" if kind != "kernel" else "other", dtype=object)
        device = text_column(t, "device")  # the stored array where it is text already
        cols["device"].append(device if isinstance(device, np.ndarray) else device.to_numpy())
        cols["stream"].append(_frames.column(t, "stream", "int64"))
        cols["name"].append(_frames.column(t, "name", object))
        cols["ts"].append(_frames.column(t, "ts", "float64"))
        cols["dur"].append(_frames.column(t, "dur", "float64"))
        cols["kind"].append(np.full(len(t), kind, dtype=object))
        cols["cls"].append(c)
    if not cols["ts"]:
        return pd.DataFrame({c: [] for c in _TIMELINE_COLUMNS}), 0
    if not all(_group.all_text(a) for c in ("name", "cls") for a in cols[c]):
        # Names that are not all text: each table's column takes the type pandas infers
        # for it, and their concatenation the common one.
        return _timeline_frames(cols, cap)
    ev = {c: np.concatenate(v) for c, v in cols.items()}
    n = len(ev["ts"])
    keep = np.arange(n)
    if n > cap:
        first = ev["cls"] != "communication"
        keep = np.sort(np.lexsort((-ev["dur"], first))[:cap])
    # In time order, ties (and missing times, last) as they were: a stable sort.
    keep = keep[np.argsort(ev["ts"][keep], kind="stable")]
    return _frames.frame({c: ev[c][keep] for c in _TIMELINE_COLUMNS}), n


def _timeline_frames(cols: dict[str, list[np.ndarray]], cap: int) -> tuple[pd.DataFrame, int]:
    """:func:`_timeline` by concatenating one frame per table."""
    parts = [
        pd.DataFrame({c: cols[c][i] for c in _TIMELINE_COLUMNS}) for i in range(len(cols["ts"]))
    ]
    ev = pd.concat(parts, ignore_index=True)
    n = len(ev)
    if n > cap:
        first = (ev["cls"] != "communication").to_numpy()
        order = np.lexsort((-_frames.column(ev, "dur", "float64"), first))
        ev = ev.iloc[np.sort(order[:cap])]
    ev = ev.sort_values("ts", kind="stable").reset_index(drop=True)
    return ev[list(_TIMELINE_COLUMNS)], n
