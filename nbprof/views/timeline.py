"""The zoomable Bokeh timeline: GPU streams, CPU threads, steps, idle gaps, NVML samples.

Python prepares data; the browser decides what to draw (nbprof/views/js/lod.js, the one
implementation of the level of detail, and js/timeline.js, which wires it to the plots).

Every event (kernels, copies, memsets, top-level CPU ops, runtime calls, steps,
annotations) goes into one compact store embedded in the document: per lane, sorted by
start, delta-encoded start ticks and duration ticks (uint32), an id into a table of unique
(name, class, grid, block, occupancy, op) signatures, and the delta-encoded index of the
event it is linked to (a kernel's launching call, a launch's kernel). Bokeh gzips these
typed arrays before base64, so repeated training-loop kernels cost a few bytes each.

The drawn sources start empty: at first paint and on every change of the x range the
browser fills them with the exact events of the window when at most ``cap`` are there,
else with a per-lane aggregate (busy fraction per time bin, dominant class) of at most
``agg_cap`` bars. The binning is level of detail for drawing, not a metric.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from nbprof.views._style import (
    CLASS_IDS,
    CLASSES,
    GAP_CAUSES,
    GAP_HATCH,
    TIP_KINDS,
    short_name,
)

if TYPE_CHECKING:
    from bokeh.models import LayoutDOM

    from nbprof.job import Job
    from nbprof.result import Profile

logger = logging.getLogger(__name__)

#: Exact events drawn at most (else the aggregate is shown).
DEFAULT_CAP = 20_000
#: Aggregate bars drawn at most (lanes x bins).
DEFAULT_AGG_CAP = 24_000
MAX_BINS = 800
OVERVIEW_BINS = 300
#: Idle gaps shaded at most (the longest ones).
MAX_GAPS = 2_000
#: Pixels per lane, and the plot's height limits: a few lanes still get a plot tall enough
#: to read (not a stripe), many lanes scroll with the page instead of shrinking.
LANE_PX = 26
MIN_PLOT_PX = 300
MAX_PLOT_PX = 2400
BAR_HEIGHT = 0.8
#: Left and right borders (px) shared by the timeline, the sample chart and the overview,
#: so their plot areas start and end at the same x (js/timeline.js widens all three to the
#: widest y axis once the lane labels are measured).
MIN_BORDER_LEFT = 60
MIN_BORDER_RIGHT = 16

#: Hover value of a field that does not apply to the event (a CPU op has no grid).
_NA = "—"
_EVENT_COLUMNS = (
    "lane", "ts", "dur", "cls", "name", "grid", "block", "occ", "op", "extra", "bytes", "corr",
)  # fmt: skip
#: Marks "no link" in the delta-encoded link array (lod.js: NO_LINK).
NO_LINK = -(2**31)

#: Names of the models js/timeline.js looks up in the document.
DETAIL_KINDS = tuple(dict.fromkeys(TIP_KINDS.values()))


@dataclass
class Lane:
    label: str
    kind: str  # "steps" | "annotations" | "cpu_ops" | "runtime" | "gpu"
    key: tuple[Any, ...]


@dataclass
class TimelineData:
    """Everything the timeline draws, before Bokeh (what the tests and benchmark inspect)."""

    lanes: list[Lane]
    #: per event, sorted by (lane, ts): lane, x (µs since t0), dur (µs), sig
    lane_offsets: np.ndarray
    x: np.ndarray
    dur: np.ndarray
    sig: np.ndarray
    #: unique signatures: name, cls (class id), grid, block, occ, op, extra (strings),
    #: bytes (float, NaN when not a copy or memset); short (what a person reads it by)
    sigs: pd.DataFrame
    t0: float
    span: float
    #: per event, the index of its linked event (-1 none): kernel <-> launching call
    link: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    notes: list[str] = field(default_factory=list)

    @property
    def event_count(self) -> int:
        return len(self.x)


@dataclass
class Timeline:
    #: main plot, NVML tracks (when drawn) and the overview strip, in one Column
    layout: LayoutDOM
    #: the same plots, for embedding as separate roots of one document (see dashboard)
    figures: list[Any]
    data: TimelineData
    #: class keys present in the trace (for the legend)
    classes: list[str]
    #: idle gap causes shaded (for the legend)
    gap_causes: list[str]
    notes: list[str]
    #: what js/timeline.js needs besides the document (JSON-serializable)
    meta: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------------------
# Collecting events into lanes
# --------------------------------------------------------------------------------------


def collect(profile: Profile) -> TimelineData:
    """Lanes and the compact event store for ``profile`` (no Bokeh needed)."""
    trace = profile.trace
    notes: list[str] = []
    multi_rank = len(trace.ranks) > 1
    frames: list[pd.DataFrame] = []
    lanes: list[Lane] = []
    lane_index: dict[tuple[Any, ...], int] = {}

    def prefix(rank: int) -> str:
        return f"r{rank} " if multi_rank else ""

    def add_lanes(keys: list[tuple[Any, ...]], kind: str, label: Any) -> None:
        for key in keys:
            if key not in lane_index:
                lane_index[key] = len(lanes)
                lanes.append(Lane(_fit_label(label(key)), kind, key))

    # Lanes are ordered per rank: steps, annotations, CPU threads, then GPU streams.
    kernels = trace.kernels
    classes = _kernel_classes(profile, notes)
    for rank in trace.ranks or [0]:
        st = trace.steps[trace.steps["rank"] == rank]
        if len(st):
            add_lanes([("steps", rank)], "steps", lambda k: f"{prefix(k[1])}steps")
            frames.append(_frame(st, ("steps", rank), lane_index, CLASS_IDS["step"]))
        an = trace.annotations[trace.annotations["rank"] == rank]
        for on_gpu, grp in an.groupby("on_gpu", sort=True):
            key: tuple[Any, ...] = ("annotations", rank, bool(on_gpu))
            add_lanes(
                [key],
                "annotations",
                lambda k: f"{prefix(k[1])}{'GPU ' if k[2] else ''}annotations",
            )
            cls = CLASS_IDS["gpu_annotation" if on_gpu else "annotation"]
            frames.append(_frame(grp, key, lane_index, cls))
        ops = trace.cpu_ops[(trace.cpu_ops["rank"] == rank) & (trace.cpu_ops["depth"] == 0)]
        rt = trace.runtime[trace.runtime["rank"] == rank]
        threads = sorted(
            set(zip(ops["pid"].tolist(), ops["tid"].tolist(), strict=True))
            | set(zip(rt["pid"].tolist(), rt["tid"].tolist(), strict=True))
        )
        names = _thread_names(threads, ops)
        for pid, tid in threads:
            top = ops[(ops["pid"] == pid) & (ops["tid"] == tid)]
            thread = names[(pid, tid)]
            if len(top):
                key = ("cpu_ops", rank, pid, tid)
                add_lanes([key], "cpu_ops", lambda k, t=thread: f"{prefix(k[1])}{t}: ops")
                frames.append(_frame(top, key, lane_index, CLASS_IDS["cpu_op"]))
            calls = rt[(rt["pid"] == pid) & (rt["tid"] == tid)]
            if len(calls):
                key = ("runtime", rank, pid, tid)
                add_lanes([key], "runtime", _runtime_label(calls, prefix, thread))
                frames.append(_runtime_frame(calls, key, lane_index))
        gpu_keys: set[tuple[Any, ...]] = set()
        per_kind = {"kernels": kernels, "memcpy": trace.memcpy, "memset": trace.memset}
        for table in per_kind.values():
            t = table[table["rank"] == rank]
            gpu_keys.update(("gpu", rank, d, s) for d, s in _stream_codes(t)[1])
        add_lanes(
            sorted(gpu_keys, key=lambda k: (_device_sort(k[2]), k[3])),
            "gpu",
            lambda k: f"{prefix(k[1])}GPU {k[2]} stream {k[3]}",
        )
        k = kernels[kernels["rank"] == rank]
        if len(k):
            frames.append(_kernel_frame(k, classes.loc[k.index], lane_index, rank))
        m = trace.memcpy[trace.memcpy["rank"] == rank]
        if len(m):
            frames.append(_memcpy_frame(m, lane_index, rank))
        s = trace.memset[trace.memset["rank"] == rank]
        if len(s):
            frames.append(_gpu_frame(s, lane_index, rank, CLASS_IDS["memset"], extra=_bytes(s)))

    frames = [f for f in frames if len(f)]
    if frames:
        ev = pd.concat(frames, ignore_index=True)
    else:
        ev = pd.DataFrame({c: pd.Series(dtype="object") for c in _EVENT_COLUMNS})
    return _pack(ev, lanes, notes)


def collect_job(job: Job) -> tuple[TimelineData, pd.DataFrame]:
    """The timeline of a job: each rank's GPU streams, from the sample of its events its
    summary keeps (its collectives, then its longest events), the ranks placed on one time
    axis as the analysis placed them; and the largest idle gaps of each rank (its
    summary's ``idle_gaps``), in the analysis' columns, on that axis."""
    notes: list[str] = []
    lanes: list[Lane] = []
    lane_index: dict[tuple[Any, ...], int] = {}
    frames: list[pd.DataFrame] = []
    gap_parts: list[pd.DataFrame] = []
    start = {r.path: r.start_us for r in job.diagnosis.ranks}
    rank_of = {r.path: r.rank for r in job.diagnosis.ranks}
    sampled = shown = 0
    unclocked = False
    for s in sorted(job.summaries, key=lambda s: rank_of.get(s.path, s.rank)):
        rank = rank_of.get(s.path, s.rank)
        # Where the analysis put the rank's first event on the job's axis (None: no
        # shared clock, and each rank is drawn from its own first event).
        at = start.get(s.path)
        shift = float(at) - s.window[0] if at is not None else -s.window[0]
        unclocked |= at is None
        ev = s.timeline
        sampled += int(s.gpu_events)
        shown += len(ev)
        if ev.empty:
            continue
        dev = ev["device"].astype(str).to_numpy()
        stream = ev["stream"].to_numpy(dtype=np.int64)
        keys = sorted(set(zip(dev.tolist(), stream.tolist(), strict=True)),
                      key=lambda k: (_device_sort(k[0]), k[1]))  # fmt: skip
        for d, st in keys:
            key = ("gpu", rank, d, st)
            lane_index[key] = len(lanes)
            lanes.append(Lane(f"r{rank} GPU {d} stream {st}", "gpu", key))
        lane = np.array(
            [lane_index[("gpu", rank, d, st)] for d, st in zip(dev, stream.tolist(), strict=True)],
            dtype=np.int64,
        )
        kind = ev["kind"].astype(str).to_numpy()
        cls = np.array(
            [
                CLASS_IDS["memset"] if k == "memset"
                else CLASS_IDS["copy_other"] if k == "memcpy"
                else CLASS_IDS.get(str(c), CLASS_IDS["kernel"])
                for k, c in zip(kind, ev["cls"].tolist(), strict=True)
            ],
            dtype=np.uint8,
        )  # fmt: skip
        n = len(ev)
        frames.append(
            pd.DataFrame(
                {
                    "lane": lane,
                    "ts": ev["ts"].to_numpy(dtype=np.float64) + shift,
                    "dur": np.nan_to_num(ev["dur"].to_numpy(dtype=np.float64)).clip(min=0.0),
                    "cls": cls,
                    "name": ev["name"].astype(str).to_numpy(),
                    "grid": "unknown", "block": "unknown", "occ": "unknown", "op": "unknown",
                    "extra": _NA,
                    "bytes": np.full(n, np.nan), "corr": np.full(n, -1, dtype=np.int64),
                }
            )
        )  # fmt: skip
        g = s.diagnosis.idle_gaps
        if len(g):
            g = g.assign(rank=rank, start=g["start"] + shift, end=g["end"] + shift)
            gap_parts.append(g)
    if shown < sampled:
        notes.append(
            f"Each rank's timeline is a sample of its GPU events: its collectives first, then "
            f"its longest events ({shown:,} of {sampled:,} in all); idle gaps are each rank's "
            "largest."
        )
    if unclocked:
        notes.append(
            "Some ranks have no wall-clock timestamps: each rank is drawn from its own first "
            "event, so their times do not line up."
        )
    ev = (
        pd.concat(frames, ignore_index=True)
        if frames
        else pd.DataFrame({c: pd.Series(dtype="object") for c in _EVENT_COLUMNS})
    )
    data = _pack(ev, lanes, notes)
    gaps = pd.concat(gap_parts, ignore_index=True) if gap_parts else None
    if gaps is not None:
        gaps = gaps.sort_values("dur", ascending=False, kind="stable").reset_index(drop=True)
    return data, gaps if gaps is not None else pd.DataFrame()


def _thread_names(threads: list[tuple[int, int]], ops: pd.DataFrame) -> dict[tuple[int, int], str]:
    """What each CPU thread is, in words a person uses for it.

    Kineto names every thread "thread <tid> (python)", which says nothing. On Linux a
    process' main thread has tid == pid; PyTorch runs backward passes on its autograd
    engine's threads, whose top-level ops are ``autograd::engine::evaluate_function``.
    Other threads are numbered in order (tids can be pthread handles such as -1220540864).
    """
    names: dict[tuple[int, int], str] = {}
    autograd = set()
    if len(ops):
        is_ag = ops["name"].astype(str).str.startswith("autograd::engine")
        autograd = set(zip(ops["pid"][is_ag].tolist(), ops["tid"][is_ag].tolist(), strict=True))
    others = 0
    for pid, tid in threads:
        if tid == pid:
            names[(pid, tid)] = "main thread"
        elif (pid, tid) in autograd:
            names[(pid, tid)] = "autograd thread"
        else:
            others += 1
            names[(pid, tid)] = f"thread {tid}" if 0 <= tid < 10**7 else f"thread #{others}"
    # Several processes (DataLoader workers) can each have a main thread: name the process.
    if len({pid for pid, _ in threads}) > 1:
        for (pid, tid), name in names.items():
            names[(pid, tid)] = f"{name} (pid {pid})"
    return names


def _device_sort(d: str) -> tuple[int, Any]:
    return (0, int(d)) if d.lstrip("-").isdigit() else (1, d)


def _kernel_classes(profile: Profile, notes: list[str]) -> pd.Series:
    kernels = profile.trace.kernels
    unknown = pd.Series(CLASS_IDS["kernel"], index=kernels.index, dtype="uint8")
    if not len(kernels):
        return unknown
    try:
        table = profile.diagnosis.kernel_class
    except Exception as e:  # a broken analysis must not take the timeline down with it
        logger.warning("diagnosis unavailable for the timeline: %s", e)
        table = None
    # One row per kernel when the analysis classified them; empty when it did not.
    if table is None or not len(table):
        notes.append("Kernel classes unavailable from the analysis: kernels drawn in grey.")
        return unknown
    cls = table["cls"].reindex(kernels.index).astype(object)
    ids = cls.map(CLASS_IDS).fillna(CLASS_IDS["kernel"])
    return ids.astype("uint8")


def _base(t: pd.DataFrame, lanes: np.ndarray | int, cls: np.ndarray | int) -> dict[str, Any]:
    n = len(t)
    return {
        "lane": np.broadcast_to(np.asarray(lanes, dtype=np.int64), (n,)),
        "ts": t["ts"].to_numpy(dtype=np.float64),
        "dur": np.nan_to_num(t["dur"].to_numpy(dtype=np.float64), nan=0.0).clip(min=0.0),
        "cls": np.broadcast_to(np.asarray(cls, dtype=np.uint8), (n,)),
        "name": t["name"].astype(str).to_numpy(),
    }


def _frame(
    t: pd.DataFrame, key: tuple[Any, ...], idx: dict[tuple[Any, ...], int], cls: int
) -> pd.DataFrame:
    d = _base(t, idx[key], cls)
    d.update(grid=_NA, block=_NA, occ=_NA, op=_NA, extra=_NA, bytes=np.nan, corr=-1)
    return pd.DataFrame(d)


#: Characters of a lane label shown: the axis is as wide as its longest label, and a device
#: or stream id from a trace can be any length.
_LABEL_CHARS = 40


def _fit_label(text: str) -> str:
    """``text``, or its start and end around an ellipsis when it is too long for the axis
    (the end is kept: it says which stream)."""
    if len(text) <= _LABEL_CHARS:
        return text
    keep = _LABEL_CHARS - 1
    return text[: keep - keep // 2] + "…" + text[-(keep // 2) :]


def _runtime_label(calls: pd.DataFrame, prefix: Any, thread: str) -> Any:
    """Lane label for one (pid, tid) of runtime records.

    Kineto writes CUDA synchronization records (cat ``cuda_sync``) with the device as pid
    and the stream as tid (-1: the whole context), not a CPU thread.
    """
    if len(calls) and bool((calls["cat"] == "cuda_sync").all()):
        return lambda k: (
            f"{prefix(k[1])}GPU {k[2]} {'context' if k[3] == -1 else f'stream {k[3]}'} syncs"
        )
    return lambda k: f"{prefix(k[1])}{thread}: CUDA calls"


def _runtime_frame(
    t: pd.DataFrame, key: tuple[Any, ...], idx: dict[tuple[Any, ...], int]
) -> pd.DataFrame:
    # Classify the few distinct (name, cat) pairs, not the million calls.
    nc, nu = pd.factorize(t["name"].astype(str))
    cc, cu = pd.factorize(t["cat"].astype(str))
    codes, pairs = pd.factorize(nc.astype(np.int64) * (len(cu) + 1) + cc)
    ids = []
    for p in pairs.tolist():
        name, cat = str(nu[p // (len(cu) + 1)]), str(cu[p % (len(cu) + 1)])
        if cat == "cuda_sync" or "Synchronize" in name:
            ids.append(CLASS_IDS["runtime_sync"])
        elif "Launch" in name:
            ids.append(CLASS_IDS["runtime_launch"])
        else:
            ids.append(CLASS_IDS["runtime_other"])
    cls = np.asarray(ids, dtype=np.uint8)[codes]
    d = _base(t, idx[key], cls)
    # Only launches link to a kernel; a sync record's correlation names no kernel.
    launch = cls == CLASS_IDS["runtime_launch"]
    corr = np.where(launch, t["correlation"].to_numpy(dtype=np.int64), -1)
    d.update(
        grid=_NA, block=_NA, occ=_NA, op=_NA, extra=t["cat"].astype(str).to_numpy(),
        bytes=np.nan, corr=corr,
    )  # fmt: skip
    return pd.DataFrame(d)


def _stream_codes(t: pd.DataFrame) -> tuple[np.ndarray, list[tuple[str, int]]]:
    """Per row, an index into the distinct (device, stream) pairs of ``t``."""
    dc, du = pd.factorize(t["device"].astype(str))
    sc, su = pd.factorize(t["stream"].astype(np.int64))
    radix = len(su) + 1
    codes, pairs = pd.factorize(dc.astype(np.int64) * radix + sc)
    keys = [(str(du[p // radix]), int(su[p % radix])) for p in pairs.tolist()]
    return codes, keys


def _gpu_lanes(t: pd.DataFrame, idx: dict[tuple[Any, ...], int], rank: int) -> np.ndarray:
    codes, keys = _stream_codes(t)
    lane_of = np.array([idx[("gpu", rank, d, s)] for d, s in keys], dtype=np.int64)
    return lane_of[codes]


def _gpu_frame(
    t: pd.DataFrame,
    idx: dict[tuple[Any, ...], int],
    rank: int,
    cls: np.ndarray | int,
    extra: Any = "",
) -> pd.DataFrame:
    d = _base(t, _gpu_lanes(t, idx, rank), cls)
    op = t["op"].astype(str).to_numpy() if "op" in t else ""
    size = t["bytes"].to_numpy(dtype=np.float64) if "bytes" in t else np.nan
    d.update(
        grid=_NA, block=_NA, occ=_NA, op=_unknown(op), extra=extra,
        bytes=np.where(np.asarray(size) >= 0, size, np.nan), corr=_corr(t),
    )  # fmt: skip
    return pd.DataFrame(d)


def _corr(t: pd.DataFrame) -> np.ndarray:
    if "correlation" not in t:
        return np.full(len(t), -1, dtype=np.int64)
    return t["correlation"].to_numpy(dtype=np.int64)


def _kernel_frame(
    t: pd.DataFrame, cls: pd.Series, idx: dict[tuple[Any, ...], int], rank: int
) -> pd.DataFrame:
    d = _base(t, _gpu_lanes(t, idx, rank), cls.to_numpy(dtype=np.uint8))
    d.update(
        grid=_ints(t["grid"]),
        block=_ints(t["block"]),
        occ=_occ(t["occupancy"]),
        op=_unknown(t["op"].astype(str).to_numpy()),
        extra=_NA,
        bytes=np.nan,
        corr=_corr(t),
    )
    return pd.DataFrame(d)


def _memcpy_frame(t: pd.DataFrame, idx: dict[tuple[Any, ...], int], rank: int) -> pd.DataFrame:
    kind = t["kind"].astype(str)
    cls = kind.map(
        {
            "HtoD": CLASS_IDS["copy_htod"],
            "DtoH": CLASS_IDS["copy_dtoh"],
            "DtoD": CLASS_IDS["copy_dtod"],
            "PtoP": CLASS_IDS["copy_dtod"],
        }
    ).fillna(CLASS_IDS["copy_other"])
    route = t["src"].astype(str) + " → " + t["dst"].astype(str)
    extra = _bytes(t) + np.where(route.to_numpy() == " → ", "", ", " + route.to_numpy())
    return _gpu_frame(t, idx, rank, cls.to_numpy(dtype=np.uint8), extra=extra)


def _bytes(t: pd.DataFrame) -> np.ndarray:
    b = t["bytes"].to_numpy(dtype=np.int64)
    # Formatting unique values only: copies repeat a handful of sizes.
    u, inv = np.unique(b, return_inverse=True)
    labels = np.array(
        [f"{v:,} bytes" if v >= 0 else "size unknown" for v in u.tolist()], dtype=object
    )
    return labels[inv]


def _unknown(v: Any) -> Any:
    """ "" (the trace does not say) shown as "unknown" in the hover."""
    if isinstance(v, str):
        return v or "unknown"
    return np.where(np.asarray(v, dtype=object) == "", "unknown", v)


def _ints(s: pd.Series) -> np.ndarray:
    v = s.to_numpy(dtype=np.int64)
    u, inv = np.unique(v, return_inverse=True)
    labels = np.array([str(x) if x >= 0 else "unknown" for x in u.tolist()], dtype=object)
    return labels[inv]


def _occ(s: pd.Series) -> np.ndarray:
    v = np.round(s.to_numpy(dtype=np.float64), 1)
    u, inv = np.unique(v, return_inverse=True)  # NaNs sort last and compare unequal; fine
    # Kineto writes 0 where it did not compute the occupancy (see analysis.utilization).
    labels = np.array(
        [
            "unknown" if np.isnan(x) else "not computed" if x == 0 else f"{x:g} %"
            for x in u.tolist()
        ],
        dtype=object,
    )
    return labels[inv]


def _pack(ev: pd.DataFrame, lanes: list[Lane], notes: list[str]) -> TimelineData:
    n = len(ev)
    sig_cols = ["cls", "name", "grid", "block", "occ", "op", "extra", "bytes"]
    if n == 0:
        empty = pd.DataFrame({c: pd.Series(dtype="object") for c in [*sig_cols, "short"]})
        return TimelineData(
            lanes=[],
            lane_offsets=np.zeros(1, dtype=np.int64),
            x=np.zeros(0),
            dur=np.zeros(0),
            sig=np.zeros(0, dtype=np.uint32),
            sigs=empty,
            t0=0.0,
            span=1.0,
            notes=notes,
        )
    # No empty lanes: renumber the lanes that hold events, keeping their order.
    used = np.unique(ev["lane"].to_numpy(dtype=np.int64))
    renumber = np.full(len(lanes), -1, dtype=np.int64)
    renumber[used] = np.arange(len(used))
    lanes = [lanes[i] for i in used.tolist()]
    for c in sig_cols[2:7]:
        ev[c] = ev[c].astype(str)
    ev["bytes"] = ev["bytes"].astype(np.float64)
    # One id per unique combination: factorize each column, combine the codes, unique.
    key = np.zeros(n, dtype=np.int64)
    for c in sig_cols:
        codes, uniques = pd.factorize(ev[c], use_na_sentinel=False)
        # Re-factorize so the combined key stays below n and never overflows int64.
        key = pd.factorize(key * (len(uniques) + 1) + codes)[0].astype(np.int64)
    _, first, sig = np.unique(key, return_index=True, return_inverse=True)
    sigs = ev[sig_cols].iloc[first].reset_index(drop=True)
    sigs["short"] = [short_name(x) for x in sigs["name"].tolist()]
    lane = renumber[ev["lane"].to_numpy(dtype=np.int64)]
    ts = ev["ts"].to_numpy(dtype=np.float64)
    dur = ev["dur"].to_numpy(dtype=np.float64)
    order = np.lexsort((ts, lane))
    lane, ts, dur, sig = lane[order], ts[order], dur[order], sig[order]
    t0 = float(ts.min())
    span = max(float((ts + dur).max()) - t0, 1e-3)
    offsets = np.searchsorted(lane, np.arange(len(lanes) + 1), side="left").astype(np.int64)
    rank = np.array([int(ln.key[1]) for ln in lanes], dtype=np.int64)[lane]
    link = _links(
        ev["corr"].to_numpy(dtype=np.int64)[order],
        rank,
        ev["cls"].to_numpy(dtype=np.int64)[order] == CLASS_IDS["runtime_launch"],
    )
    return TimelineData(
        lanes=lanes,
        lane_offsets=offsets,
        x=ts - t0,
        dur=dur,
        sig=sig.astype(np.uint32),
        sigs=sigs,
        t0=t0,
        span=span,
        link=link,
        notes=notes,
    )


def _links(corr: np.ndarray, rank: np.ndarray, is_launch: np.ndarray) -> np.ndarray:
    """Per event, the index of the event with the same (rank, correlation) on the other
    side of a launch (a launch call's GPU event, a GPU event's launch call), else -1."""
    link = np.full(len(corr), -1, dtype=np.int64)
    has = corr >= 0
    if not has.any():
        return link
    key = rank.astype(np.int64) * (int(corr.max()) + 1) + corr
    idx = np.arange(len(corr))
    launches = pd.Series(idx[has & is_launch], index=key[has & is_launch])
    gpu = pd.Series(idx[has & ~is_launch], index=key[has & ~is_launch])
    launches = launches[~launches.index.duplicated()]
    gpu = gpu[~gpu.index.duplicated()]
    both = launches.index.intersection(gpu.index)
    a, b = launches[both].to_numpy(), gpu[both].to_numpy()
    link[a] = b
    link[b] = a
    return link


def encode_links(link: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Links as per-lane differences to the previous linked event's partner (int32), with
    NO_LINK for events without one; js/lod.js decodeLinks inverts it."""
    out = np.full(len(link), NO_LINK, dtype=np.int64)
    for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True):
        part = link[a:b]
        has = np.flatnonzero(part >= 0)
        if not len(has):
            continue
        partners = part[has]
        out[a + has] = np.diff(partners, prepend=0)
    return out.astype(np.int32)


# --------------------------------------------------------------------------------------
# Bokeh
# --------------------------------------------------------------------------------------

#: Per class id: colour, legend label and which hover applies (see TIP_KINDS).
_COLOURS = [colour for _, colour in CLASSES.values()]
_LABELS = [label for label, _ in CLASSES.values()]
_TIPS = [TIP_KINDS[k] for k in CLASSES]

#: Columns of each drawn source (filled by js/timeline.js; empty in the document).
DETAIL_COLUMNS = (
    "left", "right", "bottom", "top", "color", "i", "name", "short", "kind", "dur", "grid",
    "block", "occ", "op", "extra", "lane",
)  # fmt: skip
AGG_COLUMNS = ("left", "right", "bottom", "top", "color", "busy", "events", "kind", "lane")
GAP_HOVER_COLUMNS = ("left", "right", "bottom", "top", "dur", "cause_label", "cpu_work", "lane")

#: Hover tool name per kind of event row.
_HOVER_NAMES: dict[str, str] = {
    "kernel": "nbprof-hover-events",
    "gpu": "nbprof-hover-copies",
    "runtime": "nbprof-hover-runtime",
    "cpu": "nbprof-hover-cpu",
}

#: Per hover kind, the (label, field template) rows that apply to it. The full name, the
#: launching op and the link to the launch are in the details pane (click an event).
_TIP_ROWS: dict[str, list[tuple[str, str]]] = {
    "kernel": [
        ("class", "@kind"),
        ("duration", "@dur{0,0.000} µs"),
        ("grid × block", "@grid × @block"),
        ("occupancy", "@occ"),
        ("lane", "@lane"),
    ],
    "gpu": [
        ("class", "@kind"),
        ("duration", "@dur{0,0.000} µs"),
        ("size", "@extra"),
        ("lane", "@lane"),
    ],
    "runtime": [
        ("class", "@kind"),
        ("duration", "@dur{0,0.000} µs"),
        ("category", "@extra"),
        ("lane", "@lane"),
    ],
    "cpu": [("class", "@kind"), ("duration", "@dur{0,0.000} µs"), ("lane", "@lane")],
    "aggregate": [
        ("busy in this bin (from the trace)", "@busy{0.0} %"),
        ("events starting here", "@events"),
        ("mostly", "@kind"),
        ("lane", "@lane"),
    ],
    "gap": [
        ("duration", "@dur{0,0.0} µs"),
        ("CPU meanwhile", "@cpu_work"),
        ("lane", "@lane"),
    ],
}
_TIP_TITLES: dict[str, str] = {
    "aggregate": "zoom in for individual events",
    "gap": "idle: @cause_label",
}
#: Tooltip size caps: a name wraps inside the width, and the whole tooltip never grows
#: taller than this (a tall one would cover the lanes under the cursor).
TOOLTIP_MAX_PX = 420
TOOLTIP_MAX_HEIGHT_PX = 190


def tooltip_html(kind: str) -> str:
    """The hover template for one kind of row.

    An HTML template only for the layout (size caps, wrapping); Bokeh HTML-escapes every
    @field in it (only the "{safe}" format, never used here, would insert markup), so
    names taken from the trace stay text.
    """
    if kind in _TIP_TITLES:
        title = f'<div class="nbp-tip-title">{_TIP_TITLES[kind]}</div>'
    else:
        title = '<div class="nbp-tip-title">@short</div>'
    rows = "".join(
        f'<div><span class="nbp-tip-key">{label}:</span> {value}</div>'
        for label, value in _TIP_ROWS[kind]
    )
    more = "" if kind in _TIP_TITLES else '<div class="nbp-tip-more">click: full name, launch</div>'
    return (
        f'<div class="nbp-tip" style="max-width:{TOOLTIP_MAX_PX}px;'
        f"max-height:{TOOLTIP_MAX_HEIGHT_PX}px;overflow:hidden;white-space:normal;"
        f'overflow-wrap:anywhere;font-size:12px;line-height:1.35">{title}{rows}{more}</div>'
    )


#: Pixels of a timeline that are not rows (toolbar, axes, borders): js/lod.js plotHeight.
PAD_PX = 90


def plot_height(n_lanes: int) -> int:
    """Timeline height in px: LANE_PX per lane between MIN_PLOT_PX and MAX_PLOT_PX."""
    return int(min(max(PAD_PX + LANE_PX * n_lanes, MIN_PLOT_PX), MAX_PLOT_PX))


# --------------------------------------------------------------------------------------
# Ranks: lanes grouped by rank, each rank folded to one row or not
# --------------------------------------------------------------------------------------

#: On a rank-grouped timeline, a time axis at least every this many rows (the headers of
#: expanded ranks carry one; a long run without gets a ruler row): with LANE_PX rows, one
#: is on screen wherever a tall timeline is scrolled to.
AXIS_EVERY = 12
#: Time axes a rank-grouped timeline holds at most (js/timeline.js moves them as ranks
#: fold and unfold; each axis costs a little on every redraw).
MAX_AXES = 64
#: Ranks start folded when, all expanded, their rows would not fit the tallest plot at
#: full row height (then they would shrink below readable).
FOLD_ROWS = (MAX_PLOT_PX - PAD_PX) // LANE_PX


@dataclass
class RowLayout:
    """Rows of a timeline and the row of each lane: js/lod.js ``rowLayout``, which the
    browser runs on every fold (a test checks the two agree)."""

    #: (label, kind, group) per row; kind "lane", "header", "rank" (folded) or "ruler".
    rows: list[tuple[str, str, int]]
    #: The row each lane is drawn on (-1: a folded rank's lane its row does not show).
    lane_row: list[int]
    #: y of each time axis (the top edge of its row), y of each line between ranks.
    axes: list[float]
    separators: list[float]


def rank_groups(lanes: list[Lane]) -> list[dict[str, Any]]:
    """Consecutive lanes of each rank, when lanes of more than one rank are drawn:
    ``first``/``last`` lane (half-open), ``rank``, the lanes its row shows when folded
    (``folded``), and the rank's row label expanded (``open``) and folded (``closed``)."""
    if len({int(ln.key[1]) for ln in lanes}) < 2:
        return []
    out: list[dict[str, Any]] = []
    for i, ln in enumerate(lanes):
        r = int(ln.key[1])
        if out and out[-1]["rank"] == r and out[-1]["last"] == i:
            out[-1]["last"] = i + 1
        else:
            out.append({"rank": r, "first": i, "last": i + 1})
    for g in out:
        # Folded, a rank shows its GPU streams (what a rank is read by at a glance).
        gpu = [i for i in range(g["first"], g["last"]) if lanes[i].kind == "gpu"]
        g["folded"] = gpu or list(range(g["first"], g["last"]))
        n = len(g["folded"])
        what = ("GPU stream" if gpu else "lane") + ("s" if n != 1 else "")
        g["open"] = f"▾ rank {g['rank']}"
        g["closed"] = f"▸ rank {g['rank']} · {n} {what}"
    return out


def row_layout(
    groups: list[dict[str, Any]], lane_labels: list[str], collapsed: list[bool], every: int
) -> RowLayout:
    """The rows of a timeline (see js/lod.js ``rowLayout``, the same rules)."""
    if not groups:
        n = len(lane_labels)
        return RowLayout([(lb, "lane", -1) for lb in lane_labels], list(range(n)), [], [])
    gap = max(1, every)
    rows: list[tuple[str, str, int]] = []
    lane_row = [0] * len(lane_labels)
    axes: list[float] = []
    seps: list[float] = []
    since = 0

    def axis_row(label: str, kind: str, group: int) -> None:
        nonlocal since
        axes.append(len(rows) - 0.5)
        rows.append((label, kind, group))
        since = 0

    for gi, g in enumerate(groups):
        boundary = len(rows) - 0.5
        if collapsed[gi]:
            if since >= gap:
                axis_row("", "ruler", -1)
            elif gi > 0:
                seps.append(boundary)
            for lane in range(g["first"], g["last"]):
                lane_row[lane] = -1
            for lane in g["folded"]:
                lane_row[lane] = len(rows)
            rows.append((g["closed"], "rank", gi))
            since += 1
            continue
        axis_row(g["open"], "header", gi)
        for lane in range(g["first"], g["last"]):
            if since >= gap:
                axis_row("", "ruler", -1)
            lane_row[lane] = len(rows)
            rows.append((lane_labels[lane], "lane", gi))
            since += 1
    return RowLayout(rows, lane_row, axes, seps)


def _axis_labels(lanes: list[Lane], grouped: bool) -> list[str]:
    """A lane's label on the y axis: without its rank when a rank header says it."""
    if not grouped:
        return [ln.label for ln in lanes]
    return [ln.label.removeprefix(f"r{int(ln.key[1])} ") for ln in lanes]


def _axis_pool(groups: list[dict[str, Any]], n_lanes: int) -> int:
    """Time axes any layout of these groups can need: a header per rank, a ruler per
    AXIS_EVERY rows (the expanded layout has the most rows)."""
    if not groups:
        return 0
    rows = len(groups) + n_lanes
    return min(MAX_AXES, len(groups) + -(-rows // AXIS_EVERY) + 1)


def _empty(cols: tuple[str, ...]) -> dict[str, list[Any]]:
    return {c: [] for c in cols}


def build(
    profile: Profile | None,
    *,
    cap: int = DEFAULT_CAP,
    agg_cap: int = DEFAULT_AGG_CAP,
    data: TimelineData | None = None,
    idle_gaps: pd.DataFrame | None = None,
) -> Timeline:
    """The timeline as Bokeh figures (main plot, optional NVML tracks, overview strip) and
    the metadata js/timeline.js draws them with.

    Without a ``profile`` (a job's timeline, :func:`collect_job`), ``data`` holds the
    events and ``idle_gaps`` the gaps to shade (the analysis' ``idle_gaps`` columns)."""
    from bokeh.layouts import column
    from bokeh.models import (
        ColumnDataSource,
        CustomJSTickFormatter,
        FixedTicker,
        HoverTool,
        LabelSet,
        LinearAxis,
        Range1d,
        RangeTool,
    )
    from bokeh.plotting import figure

    if data is None:
        if profile is None:
            raise ValueError("build() needs a profile or its data")
        data = collect(profile)
    notes = list(data.notes)
    nl = max(len(data.lanes), 1)
    pad = data.span * 0.01
    full = (-pad, data.span + pad)
    x_range = Range1d(*full, bounds=full, min_interval=1e-3)
    groups = rank_groups(data.lanes)
    lane_axis = _axis_labels(data.lanes, bool(groups))
    # A big job starts with its ranks folded: one row each, unfolded on a click.
    open_rows = len(row_layout(groups, lane_axis, [False] * len(groups), AXIS_EVERY).rows)
    collapsed = [bool(groups) and open_rows > FOLD_ROWS] * len(groups)
    lay = row_layout(groups, lane_axis, collapsed, AXIS_EVERY)
    n_rows = max(len(lay.rows), 1)
    y_range = Range1d(n_rows - 0.5, -0.5)
    ticks = _tick_formatter(CustomJSTickFormatter)

    p = figure(
        x_range=x_range,
        y_range=y_range,
        height=plot_height(n_rows),
        sizing_mode="stretch_width",
        tools="xpan,xwheel_zoom,xbox_zoom,reset,save",
        active_scroll="xwheel_zoom",
        active_drag="xbox_zoom",
        x_axis_label="time since the first event",
        toolbar_location="above",
        output_backend="canvas",
        min_border_left=MIN_BORDER_LEFT,
        min_border_right=MIN_BORDER_RIGHT,
        name="nbprof-timeline",
    )
    labelled = [(y, label) for y, (label, _kind, _g) in enumerate(lay.rows) if label]
    p.yaxis.ticker = FixedTicker(ticks=[y for y, _ in labelled])
    p.yaxis.major_label_overrides = dict(labelled)
    p.xaxis.formatter = ticks
    # The time axis on top as well: on a tall timeline one of the two is always in view.
    top_axis = LinearAxis(formatter=ticks, name="nbprof-top-axis")
    p.add_layout(top_axis, "above")
    # Ranks: a time axis along each rank's header row (also the line between ranks), and
    # on rulers in long runs of rows, so one is in view on every screen of a tall
    # timeline; js/timeline.js moves them as ranks fold.
    n_axes = _axis_pool(groups, len(data.lanes))
    for k in range(n_axes):
        at = lay.axes[k] if k < len(lay.axes) else 0.0
        p.add_layout(
            LinearAxis(formatter=ticks, fixed_location=at, visible=k < len(lay.axes),
                       major_label_text_font_size="10px", name=f"nbprof-rank-axis-{k}"),
            "below",
        )  # fmt: skip
    if groups:
        p.hspan(
            y="y", line_color="#8c959f", line_width=1, line_alpha=0.9,
            source=ColumnDataSource({"y": list(lay.separators)}, name="nbprof-rank-separators"),
            name="nbprof-rank-separator-glyphs",
        )  # fmt: skip
    p.ygrid.grid_line_color = None
    p.xgrid.grid_line_alpha = 0.4
    p.outline_line_color = None

    gaps = (
        _gap_table(profile, data, notes)
        if profile is not None
        else _gaps_on_lanes(idle_gaps, data, notes)
    )
    for cause, (_label, colour) in GAP_CAUSES.items():
        p.quad(
            left="left", right="right", bottom="bottom", top="top", fill_color=colour,
            fill_alpha=0.22, hatch_pattern=GAP_HATCH[cause], hatch_color=colour,
            hatch_alpha=0.6, hatch_scale=8, line_color=None,
            source=ColumnDataSource(_empty(("left", "right", "bottom", "top")),
                                    name=f"nbprof-gaps-{cause}"),
            name=f"nbprof-gap-glyphs-{cause}",
        )  # fmt: skip
    # Filled by js/timeline.js: a label on each gap wide enough on screen to hold it.
    label_src = ColumnDataSource(_empty(("x", "y", "text")), name="nbprof-gap-labels")
    p.add_layout(
        LabelSet(x="x", y="y", text="text", source=label_src, text_font_size="9px",
                 text_align="center", text_baseline="middle", text_color="#7f4f24",
                 background_fill_color="white", background_fill_alpha=0.75,
                 name="nbprof-gap-labelset")
    )  # fmt: skip
    ticks_u32, dur_u32, tick = _encode(data)
    gap_data = ColumnDataSource(_encode_gaps(gaps, tick), name="nbprof-gap-data")
    gap_hover = ColumnDataSource(_empty(GAP_HOVER_COLUMNS), name="nbprof-gap-hover")
    # Invisible: only where a gap's tooltip may show (no event drawn there).
    gap_r = p.quad(
        left="left", right="right", bottom="bottom", top="top", fill_alpha=0.0,
        line_color=None, source=gap_hover, name="nbprof-gap-hover-glyphs",
    )  # fmt: skip
    agg = ColumnDataSource(_empty(AGG_COLUMNS), name="nbprof-aggregate")
    agg_r = p.quad(
        left="left", right="right", bottom="bottom", top="top", fill_color="color",
        line_color=None, fill_alpha=0.9, source=agg, name="nbprof-aggregate-glyphs",
    )  # fmt: skip
    # One source and renderer per kind of event, each with the hover fields that apply.
    det_r = {}
    for kind in DETAIL_KINDS:
        src = ColumnDataSource(_empty(DETAIL_COLUMNS), name=f"nbprof-detail-{kind}")
        det_r[kind] = p.quad(
            left="left", right="right", bottom="bottom", top="top", fill_color="color",
            line_color="color", line_width=0.5, source=src,
            name=f"nbprof-detail-glyphs-{kind}",
        )  # fmt: skip
    # Search matches and the pinned event with its linked event, outlined on top.
    mark = ColumnDataSource(_empty(("left", "right", "bottom", "top")), name="nbprof-marks")
    p.quad(
        left="left", right="right", bottom="bottom", top="top", fill_alpha=0.0,
        line_color="#f5b800", line_width=1.5, source=mark, name="nbprof-mark-glyphs",
    )  # fmt: skip
    pin = ColumnDataSource(_empty(("left", "right", "bottom", "top")), name="nbprof-pinned")
    p.quad(
        left="left", right="right", bottom="bottom", top="top", fill_alpha=0.0,
        line_color="#e4004f", line_width=2.5, source=pin, name="nbprof-pinned-glyphs",
    )  # fmt: skip
    link = ColumnDataSource(_empty(("x0", "y0", "x1", "y1")), name="nbprof-link")
    p.segment(
        x0="x0", y0="y0", x1="x1", y1="y1", line_color="#e4004f", line_width=2,
        line_dash="dashed", source=link, name="nbprof-link-glyphs",
    )  # fmt: skip
    bar_labels = ColumnDataSource(_empty(("x", "y", "text")), name="nbprof-bar-labels")
    p.add_layout(
        LabelSet(x="x", y="y", text="text", source=bar_labels, text_font_size="10px",
                 text_baseline="middle", text_color="#ffffff", x_offset=3,
                 name="nbprof-bar-labelset")
    )  # fmt: skip
    p.add_tools(
        *[
            HoverTool(renderers=[det_r[kind]], tooltips=tooltip_html(kind), name=name)
            for kind, name in _HOVER_NAMES.items()
        ],
        HoverTool(
            renderers=[agg_r], tooltips=tooltip_html("aggregate"), name="nbprof-hover-aggregate"
        ),
        HoverTool(renderers=[gap_r], tooltips=tooltip_html("gap"), name="nbprof-hover-gaps"),
    )

    sig_dtype = np.uint16 if len(data.sigs) <= np.iinfo(np.uint16).max + 1 else np.uint32
    link_d = encode_links(
        data.link if len(data.link) == data.event_count else np.full(data.event_count, -1),
        data.lane_offsets,
    )
    sigs = ColumnDataSource(
        {
            "cls": data.sigs["cls"].to_numpy(dtype=np.uint8),
            "bytes": data.sigs["bytes"].to_numpy(dtype=np.float64),
            **{
                c: data.sigs[c].astype(str).tolist()
                for c in ("name", "short", "grid", "block", "occ", "op", "extra")
            },
        },
        name="nbprof-sigs",
    )
    store = ColumnDataSource(
        {"dx": ticks_u32, "dd": dur_u32, "sig": data.sig.astype(sig_dtype), "dl": link_d},
        name="nbprof-store",
    )
    # Sources only the browser reads ride on an invisible glyph, so the document keeps them.
    p.scatter(x=[], y=[], visible=False, name="nbprof-data-holder")
    holder = p.renderers[-1]
    holder.tags = [store, sigs, gap_data]

    parts: list[Any] = [p]
    samples_fig = (
        _samples_figure(profile, data, x_range, ticks, notes) if profile is not None else None
    )
    if samples_fig is not None:
        parts.append(samples_fig)

    ov_src = ColumnDataSource(_empty(("left", "right", "bottom", "top", "color")),
                              name="nbprof-overview-bars")  # fmt: skip
    ov = figure(
        x_range=Range1d(*full),
        y_range=Range1d(nl - 0.5, -0.5),
        height=max(75, min(120, 8 * nl + 40)),
        sizing_mode="stretch_width",
        toolbar_location=None,
        tools="",
        min_border_left=MIN_BORDER_LEFT,
        min_border_right=MIN_BORDER_RIGHT,
        name="nbprof-overview",
    )
    ov.quad(
        left="left", right="right", bottom="bottom", top="top", fill_color="color",
        line_color=None, source=ov_src,
    )  # fmt: skip
    ov.yaxis.visible = False
    ov.xaxis.formatter = ticks
    ov.ygrid.grid_line_color = None
    ov.xgrid.grid_line_color = None
    ov.title.text = "overview: drag the box to navigate"
    ov.title.text_font_size = "10px"
    ov.title.text_font_style = "normal"
    rt = RangeTool(x_range=x_range)
    rt.overlay.fill_color = "#1f78b4"
    rt.overlay.fill_alpha = 0.15
    ov.add_tools(rt)
    parts.append(ov)

    present = sorted({int(c) for c in data.sigs["cls"].tolist()}) if len(data.sigs) else []
    keys = list(CLASSES)
    layout = column(*parts, sizing_mode="stretch_width", name="nbprof-timeline-layout")
    if not data.event_count:
        notes.append("The trace has no events to draw on a timeline.")
    maxdur = [
        float(data.dur[a:b].max()) if b > a else 0.0
        for a, b in zip(data.lane_offsets[:-1], data.lane_offsets[1:], strict=True)
    ]
    ranks = sorted({int(ln.key[1]) for ln in data.lanes})
    meta = {
        "offsets": data.lane_offsets.tolist(),
        "maxdur": maxdur,
        "tick": tick,
        "span": data.span,
        "cap": int(cap),
        "agg_cap": int(agg_cap),
        "max_bins": MAX_BINS,
        "overview_bins": OVERVIEW_BINS,
        "bar": BAR_HEIGHT,
        "colors": _COLOURS,
        "labels": _LABELS,
        "tips": _TIPS,
        "lanes": [ln.label for ln in data.lanes],
        "lane_axis": lane_axis,
        "groups": groups,
        "collapsed": collapsed,
        "axis_every": AXIS_EVERY,
        "n_axes": n_axes,
        "plot": {
            "lane_px": LANE_PX,
            "min_px": MIN_PLOT_PX,
            "max_px": MAX_PLOT_PX,
            "pad_px": PAD_PX,
        },
        "lane_kinds": [ln.kind for ln in data.lanes],
        "lane_ranks": [int(ln.key[1]) for ln in data.lanes],
        "ranks": len(ranks),
        "gap_labels": [label for label, _ in GAP_CAUSES.values()],
        "gap_causes": list(GAP_CAUSES),
        "cpu_work": gaps.attrs.get("cpu_labels", []),
        "events": data.event_count,
    }
    return Timeline(
        layout=layout,
        figures=parts,
        data=data,
        classes=[keys[i] for i in present],
        gap_causes=[c for c in GAP_CAUSES if (gaps["cause"] == c).any()],
        notes=notes,
        meta=meta,
    )


def _tick_formatter(cls: Any) -> Any:
    """Axis ticks in s / ms / µs: formatted by js/timeline.js (nbprof.lod.fmtTime)."""
    from nbprof.views.assets import asset

    return cls(code=asset("ticks.js"))


def _encode(data: TimelineData) -> tuple[np.ndarray, np.ndarray, float]:
    """Delta start ticks and duration ticks (uint32), and the tick length in µs.

    One tick is 1 ns while the span fits in 2**32 ns (~4.3 s), else span / 2**32: starts
    keep ns precision on short runs and stay within 1e-9 of the span on long ones.
    """
    tick = max(1e-3, data.span / 4.0e9)
    ticks = np.rint(data.x / tick).astype(np.int64)
    deltas = np.diff(ticks, prepend=0)
    starts = data.lane_offsets[:-1][data.lane_offsets[:-1] < data.lane_offsets[1:]]
    deltas[starts] = ticks[starts]  # each lane restarts from t0
    dur = np.clip(np.rint(data.dur / tick), 0, np.iinfo(np.uint32).max)
    return deltas.clip(0, np.iinfo(np.uint32).max).astype(np.uint32), dur.astype(np.uint32), tick


_GAP_COLUMNS = ("left", "right", "dur", "li", "cause", "cpu_code")


def _encode_gaps(gaps: pd.DataFrame, tick: float) -> dict[str, np.ndarray]:
    """Gaps in start order: delta start ticks and length ticks (uint32, the store's tick),
    lane, cause id (GAP_CAUSES order) and CPU-work label code; js/timeline.js decodes."""
    g = gaps.sort_values("left", kind="stable")
    start = np.rint(g["left"].to_numpy(dtype=np.float64) / tick).astype(np.int64)
    length = np.rint((g["right"] - g["left"]).to_numpy(dtype=np.float64) / tick)
    causes = {c: i for i, c in enumerate(GAP_CAUSES)}
    top = np.iinfo(np.uint32).max
    return {
        "dx": np.diff(start, prepend=0).clip(0, top).astype(np.uint32),
        "dd": length.clip(0, top).astype(np.uint32),
        "li": g["li"].to_numpy(dtype=np.uint16),
        "cause": g["cause"].map(causes).to_numpy(dtype=np.uint8),
        "cpu": g["cpu_code"].to_numpy(dtype=np.uint16),
    }


def _gap_table(profile: Profile, data: TimelineData, notes: list[str]) -> pd.DataFrame:
    """Idle gaps from analysis on their lanes (see :func:`_gaps_on_lanes`)."""
    try:
        gaps = profile.diagnosis.idle_gaps
    except Exception as e:
        logger.warning("diagnosis unavailable for idle gaps: %s", e)
        gaps = None
    return _gaps_on_lanes(gaps, data, notes)


def _gaps_on_lanes(gaps: pd.DataFrame | None, data: TimelineData, notes: list[str]) -> pd.DataFrame:
    """The analysis' idle gaps on their lanes: left/right in µs since t0, lane index,
    cause, and a code into ``attrs["cpu_labels"]`` (what the CPU did meanwhile)."""
    empty = pd.DataFrame({c: pd.Series(dtype="float64") for c in _GAP_COLUMNS})
    empty["cause"] = empty["cause"].astype(object)
    empty.attrs["cpu_labels"] = []
    if gaps is None or not len(gaps):
        return empty
    if len(gaps) > MAX_GAPS:
        notes.append(f"Showing the {MAX_GAPS:,} longest of {len(gaps):,} idle gaps.")
        gaps = gaps.nlargest(MAX_GAPS, "dur")
    lane_of = {ln.key: i for i, ln in enumerate(data.lanes)}
    keys = zip(
        gaps["rank"].astype(int).tolist(),
        gaps["device"].astype(str).tolist(),
        gaps["stream"].astype(int).tolist(),
        strict=True,
    )
    li = np.array([lane_of.get(("gpu", r, d, s), -1) for r, d, s in keys], dtype=np.int64)
    keep = li >= 0
    g = gaps[keep]
    cpu = (
        g["cpu_work"].astype(str).replace("", "unknown")
        if "cpu_work" in g
        else pd.Series("unknown", index=g.index)
    )
    codes, labels = pd.factorize(cpu)
    cause = g["cause"].astype(str)
    out = pd.DataFrame(
        {
            "left": g["start"].to_numpy(dtype=np.float64) - data.t0,
            "right": g["end"].to_numpy(dtype=np.float64) - data.t0,
            "dur": g["dur"].to_numpy(dtype=np.float64),
            "li": li[keep],
            "cause": cause.where(cause.isin(list(GAP_CAUSES)), "other").to_numpy(),
            "cpu_code": codes.astype(np.int64),
        }
    ).reset_index(drop=True)
    out.attrs["cpu_labels"] = [str(x) for x in labels.tolist()]
    return out


def _samples_figure(
    profile: Profile, data: TimelineData, x_range: Any, ticks: Any, notes: list[str]
) -> Any:
    from bokeh.models import ColumnDataSource, HoverTool, Legend, Range1d
    from bokeh.plotting import figure

    from nbprof.telemetry.model import METRICS

    samples = profile.samples
    if samples is None or not len(samples):
        return None
    if profile.trace.origin_ns is None:
        notes.append(
            "NVML samples not drawn: the trace gives no wall-clock origin to align them with."
        )
        return None
    from nbprof.telemetry import metric_series

    f = samples.frame
    origin = np.int64(profile.trace.origin_ns)
    fig = figure(
        x_range=x_range,
        y_range=Range1d(0, 105),
        height=190,
        sizing_mode="stretch_width",
        tools="",
        toolbar_location=None,
        y_axis_label="%",
        min_border_left=MIN_BORDER_LEFT,
        min_border_right=MIN_BORDER_RIGHT,
        name="nbprof-samples",
    )
    fig.title.text = f"NVML samples ({samples.source})"
    fig.xaxis.formatter = ticks
    colours = iter(_SAMPLE_COLOURS * 4)
    renderers = []
    items = []
    for gpu in sorted(f["gpu"].unique().tolist()):
        for metric, (label, unit, basis) in METRICS.items():
            if unit != "%" or metric not in f:
                continue
            # Per metric, rows where it is missing dropped: driver-buffered utilization rows
            # sit between the others as NaN, and Bokeh breaks a line at every NaN.
            t_ns, y = metric_series(samples, gpu, metric)
            if not len(y):
                continue
            # Subtract in int64: epoch nanoseconds (~1.7e18) lose ~256 ns as float64.
            x = (t_ns - origin) / 1000.0 - data.t0
            src = ColumnDataSource({"x": x, "y": y})
            r = fig.line(
                "x",
                "y",
                source=src,
                line_width=1.5,
                color=next(colours),
                name=f"nbprof-sample-{metric}-{gpu}",
            )
            r.tags = [f"GPU {gpu}: {label} ({basis})"]
            renderers.append(r)
            items.append((f"GPU {gpu} {label}", [r]))
    if not renderers:
        return None
    # The legend above the plot, in a row: inside it would cover the lines, and beside it
    # would make this plot area narrower than the timeline's.
    legend = Legend(
        items=items, orientation="horizontal", click_policy="hide", label_text_font_size="9px",
        location="top_left", name="nbprof-samples-legend",
    )  # fmt: skip
    fig.add_layout(legend, "above")
    for r in renderers:
        fig.add_tools(HoverTool(renderers=[r], tooltips=[(r.tags[0], "@y{0.0} %")], mode="vline"))
    return fig


#: NVML sample lines: distinct from each other and readable on light and dark backgrounds.
_SAMPLE_COLOURS = ["#e08a00", "#3f8fd0", "#bc2d5a", "#0fa6b0", "#922ed7", "#7ba022"]
