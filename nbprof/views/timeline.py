"""The zoomable Bokeh timeline: GPU streams, CPU threads, steps, idle gaps, NVML samples.

Large traces stay usable without a live server. Every event (kernels, copies, memsets,
top-level CPU ops, runtime calls, steps, annotations) goes into one compact store embedded
in the document: per lane, sorted by start, delta-encoded start ticks and duration ticks
(uint32) plus an id into a table of unique (name, class, grid, block, occupancy, op)
signatures. Bokeh gzips and base64-encodes these typed arrays, so repeated training-loop
kernels cost a few bytes each.

What is drawn is bounded at any zoom: a CustomJS callback on the x range draws the exact
events of the visible window when there are at most ``cap`` of them, else a per-lane
aggregate (busy fraction per time bin, coloured by the dominant class) with at most
``agg_cap`` bars. Python draws the same two levels for the initial (full) view, so the
first paint needs no callback. The binning is level of detail for drawing, not a metric.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from nbprof.views._style import CLASS_IDS, CLASSES, GAP_CAUSES, TIP_KINDS, short_name

if TYPE_CHECKING:
    from bokeh.models import LayoutDOM

    from nbprof.result import Profile

logger = logging.getLogger(__name__)

#: Exact events drawn at most (else the aggregate is shown).
DEFAULT_CAP = 20_000
#: Aggregate bars drawn at most (lanes x bins).
DEFAULT_AGG_CAP = 24_000
MAX_BINS = 800
OVERVIEW_BINS = 300
#: Idle gaps shaded at most (the longest ones), and how many of them get a text label.
MAX_GAPS = 2_000
MAX_GAP_LABELS = 12
LANE_PX = 26
BAR_HEIGHT = 0.8

#: Hover value of a field that does not apply to the event (a CPU op has no grid).
_NA = "—"
_EVENT_COLUMNS = ("lane", "ts", "dur", "cls", "name", "grid", "block", "occ", "op", "extra")


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
    #: unique signatures: name, cls (class id), grid, block, occ, op, extra (strings);
    #: short (the name with template arguments folded) and full (the name when folded)
    sigs: pd.DataFrame
    t0: float
    span: float
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
            key = ("annotations", rank, bool(on_gpu))
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
        for pid, tid in threads:
            top = ops[(ops["pid"] == pid) & (ops["tid"] == tid)]
            if len(top):
                key = ("cpu_ops", rank, pid, tid)
                add_lanes([key], "cpu_ops", lambda k: f"{prefix(k[1])}CPU {k[3]} ops")
                frames.append(_frame(top, key, lane_index, CLASS_IDS["cpu_op"]))
            calls = rt[(rt["pid"] == pid) & (rt["tid"] == tid)]
            if len(calls):
                key = ("runtime", rank, pid, tid)
                add_lanes([key], "runtime", _runtime_label(calls, prefix))
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


def _device_sort(d: str) -> tuple[int, Any]:
    return (0, int(d)) if d.lstrip("-").isdigit() else (1, d)


def _kernel_classes(profile: Profile, notes: list[str]) -> pd.Series:
    kernels = profile.trace.kernels
    unknown = pd.Series(CLASS_IDS["kernel"], index=kernels.index, dtype="uint8")
    if not len(kernels):
        return unknown
    try:
        table = profile.diagnosis.tables.get("kernel_class")
    except Exception as e:  # a broken analysis must not take the timeline down with it
        logger.warning("diagnosis unavailable for the timeline: %s", e)
        table = None
    if table is None or "cls" not in getattr(table, "columns", ()):
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
    d.update(grid=_NA, block=_NA, occ=_NA, op=_NA, extra=_NA)
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


def _runtime_label(calls: pd.DataFrame, prefix: Any) -> Any:
    """Lane label for one (pid, tid) of runtime records.

    Kineto writes CUDA synchronization records (cat ``cuda_sync``) with the device as pid
    and the stream as tid (-1: the whole context), not a CPU thread.
    """
    if len(calls) and bool((calls["cat"] == "cuda_sync").all()):
        return lambda k: (
            f"{prefix(k[1])}GPU {k[2]} {'context' if k[3] == -1 else f'stream {k[3]}'} syncs"
        )
    return lambda k: f"{prefix(k[1])}CPU {k[3]} runtime"


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
    d.update(grid=_NA, block=_NA, occ=_NA, op=_NA, extra=t["cat"].astype(str).to_numpy())
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
    d.update(grid=_NA, block=_NA, occ=_NA, op=_unknown(op), extra=extra)
    return pd.DataFrame(d)


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
    """ "" (the trace does not say) shown as "?" in the hover."""
    if isinstance(v, str):
        return v or "?"
    return np.where(np.asarray(v, dtype=object) == "", "?", v)


def _ints(s: pd.Series) -> np.ndarray:
    v = s.to_numpy(dtype=np.int64)
    u, inv = np.unique(v, return_inverse=True)
    labels = np.array([str(x) if x >= 0 else "?" for x in u.tolist()], dtype=object)
    return labels[inv]


def _occ(s: pd.Series) -> np.ndarray:
    v = np.round(s.to_numpy(dtype=np.float64), 1)
    u, inv = np.unique(v, return_inverse=True)  # NaNs sort last and compare unequal; fine
    labels = np.array(["?" if np.isnan(x) else f"{x:g} %" for x in u.tolist()], dtype=object)
    return labels[inv]


def _pack(ev: pd.DataFrame, lanes: list[Lane], notes: list[str]) -> TimelineData:
    n = len(ev)
    sig_cols = ["cls", "name", "grid", "block", "occ", "op", "extra"]
    if n == 0:
        empty = pd.DataFrame({c: pd.Series(dtype="object") for c in [*sig_cols, "short", "full"]})
        return TimelineData(
            lanes=lanes,
            lane_offsets=np.zeros(len(lanes) + 1, dtype=np.int64),
            x=np.zeros(0),
            dur=np.zeros(0),
            sig=np.zeros(0, dtype=np.uint32),
            sigs=empty,
            t0=0.0,
            span=1.0,
            notes=notes,
        )
    for c in sig_cols[2:]:
        ev[c] = ev[c].astype(str)
    # One id per unique combination: factorize each column, combine the codes, unique.
    key = np.zeros(n, dtype=np.int64)
    for c in sig_cols:
        codes, uniques = pd.factorize(ev[c], use_na_sentinel=False)
        # Re-factorize so the combined key stays below n and never overflows int64.
        key = pd.factorize(key * (len(uniques) + 1) + codes)[0].astype(np.int64)
    _, first, sig = np.unique(key, return_index=True, return_inverse=True)
    sigs = ev[sig_cols].iloc[first].reset_index(drop=True)
    # Hover titles: C++ template names run to hundreds of characters; the folded form
    # leads and the full name follows, wrapped, only where folding changed it.
    sigs["short"] = [short_name(x) for x in sigs["name"].tolist()]
    sigs["full"] = np.where(sigs["short"] == sigs["name"], "", sigs["name"])
    lane = ev["lane"].to_numpy(dtype=np.int64)
    ts = ev["ts"].to_numpy(dtype=np.float64)
    dur = ev["dur"].to_numpy(dtype=np.float64)
    order = np.lexsort((ts, lane))
    lane, ts, dur, sig = lane[order], ts[order], dur[order], sig[order]
    t0 = float(ts.min())
    span = max(float((ts + dur).max()) - t0, 1e-3)
    offsets = np.searchsorted(lane, np.arange(len(lanes) + 1), side="left").astype(np.int64)
    return TimelineData(
        lanes=lanes,
        lane_offsets=offsets,
        x=ts - t0,
        dur=dur,
        sig=sig.astype(np.uint32),
        sigs=sigs,
        t0=t0,
        span=span,
        notes=notes,
    )


# --------------------------------------------------------------------------------------
# Level of detail
# --------------------------------------------------------------------------------------


def visible_count(data: TimelineData, x0: float, x1: float) -> int:
    """Events that overlap [x0, x1] (how the callback decides exact vs aggregate)."""
    total = 0
    for lane in range(len(data.lanes)):
        a, b = data.lane_offsets[lane], data.lane_offsets[lane + 1]
        if a == b:
            continue
        x, d = data.x[a:b], data.dur[a:b]
        hi = np.searchsorted(x, x1, side="right")
        total += int(np.count_nonzero(x[:hi] + d[:hi] >= x0))
    return total


def exact(data: TimelineData, x0: float, x1: float) -> dict[str, Any]:
    """Columns for the exact glyphs overlapping [x0, x1]."""
    idx = np.flatnonzero((data.x <= x1) & (data.x + data.dur >= x0))
    lane = np.searchsorted(data.lane_offsets, idx, side="right") - 1
    s = data.sigs.iloc[data.sig[idx]]
    cls = s["cls"].to_numpy(dtype=np.int64)
    lane_labels = np.array([ln.label for ln in data.lanes], dtype=object)
    return {
        "left": data.x[idx],
        "right": data.x[idx] + data.dur[idx],
        "bottom": lane - BAR_HEIGHT / 2,
        "top": lane + BAR_HEIGHT / 2,
        "color": _COLOURS[cls].tolist(),
        "name": s["name"].tolist(),
        "short": s["short"].tolist(),
        "full": s["full"].tolist(),
        "tip": _TIPS[cls].tolist(),
        "kind": _LABELS[cls].tolist(),
        "dur": data.dur[idx],
        "grid": s["grid"].tolist(),
        "block": s["block"].tolist(),
        "occ": s["occ"].tolist(),
        "op": s["op"].tolist(),
        "extra": s["extra"].tolist(),
        "lane": lane_labels[lane].tolist(),
    }


def aggregate(data: TimelineData, x0: float, x1: float, bins: int) -> dict[str, Any]:
    """Per lane and time bin: busy fraction and dominant class over [x0, x1].

    Busy time per bin is F(edge[k+1]) - F(edge[k]) with F(x) = sum_i clamp(x - s_i, 0, d_i),
    evaluated with sorted starts/ends and prefix sums, so it is exact and vectorised.
    """
    nl, ncls = len(data.lanes), len(CLASSES)
    width = (x1 - x0) / bins
    edges = x0 + width * np.arange(bins + 1)
    busy = np.zeros((nl, ncls, bins))
    count = np.zeros((nl, bins), dtype=np.int64)
    cls_all = (
        data.sigs["cls"].to_numpy(dtype=np.int64)[data.sig]
        if data.event_count
        else np.zeros(0, np.int64)
    )
    for lane in range(nl):
        a, b = data.lane_offsets[lane], data.lane_offsets[lane + 1]
        if a == b:
            continue
        s, d, c = data.x[a:b], data.dur[a:b], cls_all[a:b]
        keep = (s <= x1) & (s + d >= x0)
        s, d, c = s[keep], d[keep], c[keep]
        if not len(s):
            continue
        sb = np.clip(((s - x0) // width).astype(np.int64), 0, bins - 1)
        np.add.at(count[lane], sb, 1)
        for k in np.unique(c):
            m = c == k
            busy[lane, k] = np.diff(_cumulative_busy(s[m], s[m] + d[m], edges))
    total = busy.sum(axis=1)
    dom = busy.argmax(axis=1)
    lane_i, bin_i = np.nonzero((total > 0) | (count > 0))
    frac = np.clip(total[lane_i, bin_i] / width, 0.0, 1.0)
    lane_labels = np.array([ln.label for ln in data.lanes], dtype=object)
    k = dom[lane_i, bin_i]
    # A bin with only very short events still gets a visible sliver.
    h = BAR_HEIGHT * np.maximum(frac, 0.08)
    return {
        "left": edges[bin_i],
        "right": edges[bin_i + 1],
        "bottom": lane_i - BAR_HEIGHT / 2,
        "top": lane_i - BAR_HEIGHT / 2 + h,
        "color": _COLOURS[k].tolist(),
        "busy": frac * 100.0,
        "events": count[lane_i, bin_i],
        "kind": _LABELS[k].tolist(),
        "lane": lane_labels[lane_i].tolist(),
    }


_GAP_HOVER_COLUMNS = ("left", "right", "bottom", "top", "dur", "cause_label", "cpu_work", "lane")


def gap_hover(gaps: dict[str, list[Any]], left: Any, right: Any, lane: Any) -> dict[str, list[Any]]:
    """The parts of each idle gap where no glyph (event or aggregate bin) is drawn on its
    lane: where the gap's tooltip may show without an event's tooltip on top of it.

    ``left``/``right``/``lane`` are the drawn glyphs (lane as an index). Mirrored in JS.
    """
    out: dict[str, list[Any]] = {c: [] for c in _GAP_HOVER_COLUMNS}
    lo = np.asarray(left, dtype=np.float64)
    hi = np.asarray(right, dtype=np.float64)
    ln = np.asarray(lane, dtype=np.int64)
    union: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for g_lane in set(gaps.get("li", [])):
        m = ln == g_lane
        order = np.argsort(lo[m], kind="stable")
        a, b = lo[m][order], hi[m][order]
        us: list[float] = []
        ue: list[float] = []
        for x0, x1 in zip(a.tolist(), b.tolist(), strict=True):
            if us and x0 <= ue[-1]:
                ue[-1] = max(ue[-1], x1)
            else:
                us.append(x0)
                ue.append(x1)
        union[g_lane] = (np.asarray(us), np.asarray(ue))
    for g in range(len(gaps.get("left", []))):
        us_a, ue_a = union.get(gaps["li"][g], (np.zeros(0), np.zeros(0)))
        start, end = gaps["left"][g], gaps["right"][g]
        pieces: list[tuple[float, float]] = []
        k = int(np.searchsorted(ue_a, start, side="right"))
        while k < len(us_a) and us_a[k] < end:
            pieces.append((start, float(us_a[k])))
            start = max(start, float(ue_a[k]))
            k += 1
        pieces.append((start, end))
        for p0, p1 in pieces:
            if p1 <= p0:
                continue
            out["left"].append(p0)
            out["right"].append(p1)
            for c in _GAP_HOVER_COLUMNS[2:]:
                out[c].append(gaps[c][g])
    return out


def _cumulative_busy(s: np.ndarray, e: np.ndarray, x: np.ndarray) -> np.ndarray:
    ss, es = np.sort(s), np.sort(e)
    cs = np.concatenate([[0.0], np.cumsum(ss)])
    ce = np.concatenate([[0.0], np.cumsum(es)])
    ns = np.searchsorted(ss, x, side="left")
    ne = np.searchsorted(es, x, side="left")
    return (x * ns - cs[ns]) - (x * ne - ce[ne])


#: Per class id: colour, legend label and which hover applies (see TIP_KINDS).
_COLOURS = np.array([colour for _, colour in CLASSES.values()], dtype=object)
_LABELS = np.array([label for label, _ in CLASSES.values()], dtype=object)
_TIPS = np.array([TIP_KINDS[k] for k in CLASSES], dtype=object)

_EMPTY_EXACT = (
    "left",
    "right",
    "bottom",
    "top",
    "color",
    "name",
    "short",
    "full",
    "tip",
    "kind",
    "dur",
    "grid",
    "block",
    "occ",
    "op",
    "extra",
    "lane",
)
_EMPTY_AGG = ("left", "right", "bottom", "top", "color", "busy", "events", "kind", "lane")


def _bins(n_lanes: int, agg_cap: int) -> int:
    return int(max(1, min(MAX_BINS, agg_cap // max(n_lanes, 1))))


# --------------------------------------------------------------------------------------
# Bokeh
# --------------------------------------------------------------------------------------

# Runs in the browser on every x-range change (coalesced to one per animation frame).
# Mirrors `visible_count`, `exact` and `aggregate` above.
_JS_UPDATE = """
const st = store;
if (st._nbp_pending) { return; }
st._nbp_pending = true;
const run = () => {
  st._nbp_pending = false;
  const M = meta;
  if (!st._nbp_x) {
    // Decode once: delta ticks -> µs since t0, per lane.
    const dx = st.data.dx, dd = st.data.dd, off = M.offsets;
    const n = dx.length, x = new Float64Array(n), d = new Float64Array(n);
    for (let l = 0; l + 1 < off.length; l++) {
      let acc = 0;
      for (let i = off[l]; i < off[l + 1]; i++) { acc += dx[i]; x[i] = acc * M.tick;
        d[i] = dd[i] * M.tick; }
    }
    st._nbp_x = x; st._nbp_d = d;
  }
  const x = st._nbp_x, d = st._nbp_d, sg = st.data.sig, off = M.offsets;
  const S = sigs.data, scls = S.cls;
  const x0 = xr.start, x1 = xr.end, nl = off.length - 1;
  const lower = (a, b, v) => { while (a < b) { const m = (a + b) >>> 1; if (x[m] < v) a = m + 1;
    else b = m; } return a; };
  const lo = new Int32Array(nl), hi = new Int32Array(nl);
  let total = 0;
  for (let l = 0; l < nl; l++) {
    lo[l] = lower(off[l], off[l + 1], x0 - M.maxdur[l]);
    hi[l] = lower(lo[l], off[l + 1], x1 + 1e-9);
    total += hi[l] - lo[l];
  }
  const half = M.bar / 2;
  // Mirrors `gap_hover`: the parts of each idle gap where no glyph is drawn on its lane,
  // so an event's (or a bin's) tooltip and a gap's never show together.
  const clip = (L, R, LI) => {
    const G = gaps.data, out = {left: [], right: [], bottom: [], top: [], dur: [],
      cause_label: [], cpu_work: [], lane: []};
    const per = new Map();
    for (let i = 0; i < L.length; i++) {
      let a = per.get(LI[i]); if (!a) { a = []; per.set(LI[i], a); } a.push([L[i], R[i]]); }
    const union = new Map();
    for (const [l, a] of per) {
      a.sort((p, q) => p[0] - q[0]);
      const u = [];
      for (const [s, e] of a) {
        const t = u[u.length - 1];
        if (t && s <= t[1]) { t[1] = Math.max(t[1], e); } else { u.push([s, e]); } }
      union.set(l, u);
    }
    for (let g = 0; g < G.left.length; g++) {
      const u = union.get(G.li[g]) || [];
      let s = G.left[g];
      const e = G.right[g];
      let a = 0, b = u.length;
      while (a < b) { const m = (a + b) >>> 1; if (u[m][1] <= s) a = m + 1; else b = m; }
      const push = (p, q) => { if (q <= p) { return; }
        out.left.push(p); out.right.push(q); out.bottom.push(G.bottom[g]); out.top.push(G.top[g]);
        out.dur.push(G.dur[g]); out.cause_label.push(G.cause_label[g]);
        out.cpu_work.push(G.cpu_work[g]); out.lane.push(G.lane[g]); };
      for (let k = a; k < u.length && u[k][0] < e; k++) {
        push(s, u[k][0]); s = Math.max(s, u[k][1]); }
      push(s, e);
    }
    return out;
  };
  if (total <= M.cap) {
    const c = {left: [], right: [], bottom: [], top: [], color: [], name: [], short: [], full: [],
               tip: [], kind: [], dur: [], grid: [], block: [], occ: [], op: [], extra: [],
               lane: []};
    const li = [];
    for (let l = 0; l < nl; l++) {
      for (let i = lo[l]; i < hi[l]; i++) {
        const e = x[i] + d[i];
        if (e < x0) { continue; }
        const s = sg[i], k = scls[s];
        c.left.push(x[i]); c.right.push(e); c.bottom.push(l - half); c.top.push(l + half);
        c.color.push(M.colors[k]); c.kind.push(M.labels[k]); c.name.push(S.name[s]);
          c.dur.push(d[i]); c.short.push(S.short[s]); c.full.push(S.full[s]);
          c.tip.push(M.tips[k]); li.push(l);
        c.grid.push(S.grid[s]); c.block.push(S.block[s]); c.occ.push(S.occ[s]);
          c.op.push(S.op[s]);
        c.extra.push(S.extra[s]); c.lane.push(M.lanes[l]);
      }
    }
    detail.data = c;
    agg.data = {left: [], right: [], bottom: [], top: [], color: [], busy: [], events: [],
      kind: [], lane: []};
    gaphover.data = clip(c.left, c.right, li);
    return;
  }
  const nb = Math.max(1, Math.min(M.max_bins, Math.floor(M.agg_cap / Math.max(nl, 1))));
  const w = (x1 - x0) / nb, nc = M.colors.length;
  const c = {left: [], right: [], bottom: [], top: [], color: [], busy: [], events: [], kind: [],
    lane: []};
  const li = [];
  const busy = new Float64Array(nb * nc), cnt = new Int32Array(nb);
  for (let l = 0; l < nl; l++) {
    if (hi[l] === lo[l]) { continue; }
    busy.fill(0); cnt.fill(0);
    for (let i = lo[l]; i < hi[l]; i++) {
      const s = x[i], e = s + d[i];
      if (e < x0) { continue; }
      const k = scls[sg[i]];
      const b0 = Math.max(0, Math.min(nb - 1, Math.floor((s - x0) / w)));
      const b1 = Math.max(0, Math.min(nb - 1, Math.floor((e - x0) / w)));
      cnt[b0] += 1;
      for (let b = b0; b <= b1; b++) {
        const ov = Math.min(e, x0 + (b + 1) * w) - Math.max(s, x0 + b * w);
        if (ov > 0) { busy[b * nc + k] += ov; }
      }
    }
    for (let b = 0; b < nb; b++) {
      let t = 0, best = 0, bk = 0;
      for (let k = 0; k < nc; k++) { const v = busy[b * nc + k]; t += v;
        if (v > best) { best = v; bk = k; } }
      if (t <= 0 && cnt[b] === 0) { continue; }
      const f = Math.min(1, t / w);
      c.left.push(x0 + b * w); c.right.push(x0 + (b + 1) * w); c.bottom.push(l - half);
      c.top.push(l - half + M.bar * Math.max(f, 0.08)); c.color.push(M.colors[bk]);
      c.busy.push(f * 100); c.events.push(cnt[b]); c.kind.push(M.labels[bk]);
        c.lane.push(M.lanes[l]); li.push(l);
    }
  }
  agg.data = c;
  detail.data = {left: [], right: [], bottom: [], top: [], color: [], name: [], short: [],
                 full: [], tip: [], kind: [], dur: [], grid: [], block: [], occ: [], op: [],
                 extra: [], lane: []};
  gaphover.data = clip(c.left, c.right, li);
};
if (typeof requestAnimationFrame === "function") { requestAnimationFrame(run); } else { run(); }
"""

_JS_TICKS = """
const a = Math.abs(tick);
if (a >= 1e6) { return (tick / 1e6).toPrecision(4).replace(/\\.?0+$/, "") + " s"; }
if (a >= 1e3) { return (tick / 1e3).toPrecision(4).replace(/\\.?0+$/, "") + " ms"; }
return tick.toPrecision(4).replace(/\\.?0+$/, "") + " µs";
"""


#: Hover tool name per kind of event row.
_HOVER_NAMES: dict[str, str] = {
    "kernel": "nbprof-hover-events",
    "gpu": "nbprof-hover-copies",
    "runtime": "nbprof-hover-runtime",
    "cpu": "nbprof-hover-cpu",
}

#: Per hover kind, the (label, field template) rows that apply to it.
_TIP_ROWS: dict[str, list[tuple[str, str]]] = {
    "kernel": [
        ("class", "@kind"),
        ("duration", "@dur{0,0.000} µs"),
        ("grid × block", "@grid × @block"),
        ("occupancy", "@occ"),
        ("launched by", "@op"),
        ("lane", "@lane"),
    ],
    "gpu": [
        ("class", "@kind"),
        ("duration", "@dur{0,0.000} µs"),
        ("size", "@extra"),
        ("launched by", "@op"),
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
#: Tooltip width cap: long C++ names wrap inside it instead of running off the plot.
TOOLTIP_MAX_PX = 460


def tooltip_html(kind: str) -> str:
    """The hover template for one kind of row.

    An HTML template only for the layout (width cap, wrapping); Bokeh HTML-escapes every
    @field in it (only the "{safe}" format, never used here, would insert markup), so
    names taken from the trace stay text.
    """
    if kind in _TIP_TITLES:
        title = f'<div style="font-weight:600">{_TIP_TITLES[kind]}</div>'
    else:
        title = (
            '<div style="font-weight:600">@short</div>'
            '<div style="font-family:ui-monospace,monospace;font-size:10.5px;opacity:.8">'
            "@full</div>"
        )
    rows = "".join(
        f'<div><span style="color:#1f78b4">{label}:</span> {value}</div>'
        for label, value in _TIP_ROWS[kind]
    )
    return (
        f'<div style="max-width:{TOOLTIP_MAX_PX}px;white-space:normal;overflow-wrap:anywhere;'
        f'font-size:12px;line-height:1.35">{title}{rows}</div>'
    )


def build(
    profile: Profile,
    *,
    cap: int = DEFAULT_CAP,
    agg_cap: int = DEFAULT_AGG_CAP,
    data: TimelineData | None = None,
) -> Timeline:
    """The timeline as a Bokeh layout (main plot, optional NVML tracks, overview strip)."""
    from bokeh.layouts import column
    from bokeh.models import (
        CDSView,
        ColumnDataSource,
        CustomJS,
        CustomJSTickFormatter,
        FixedTicker,
        GroupFilter,
        HoverTool,
        LabelSet,
        Range1d,
        RangeTool,
    )
    from bokeh.plotting import figure

    data = data if data is not None else collect(profile)
    notes = list(data.notes)
    nl = max(len(data.lanes), 1)
    pad = data.span * 0.01
    x_range = Range1d(-pad, data.span + pad, bounds=(-pad, data.span + pad), min_interval=1e-3)
    y_range = Range1d(nl - 0.5, -0.5)
    height = int(min(60 + LANE_PX * nl, 2400)) + 40
    ticks = CustomJSTickFormatter(code=_JS_TICKS)

    p = figure(
        x_range=x_range,
        y_range=y_range,
        height=height,
        sizing_mode="stretch_width",
        tools="xpan,xwheel_zoom,xbox_zoom,reset,save",
        active_scroll="xwheel_zoom",
        active_drag="xbox_zoom",
        x_axis_label="time since the first event",
        toolbar_location="above",
        output_backend="canvas",
        name="nbprof-timeline",
    )
    p.yaxis.ticker = FixedTicker(ticks=list(range(len(data.lanes))))
    p.yaxis.major_label_overrides = {i: ln.label for i, ln in enumerate(data.lanes)}
    p.xaxis.formatter = ticks
    p.ygrid.grid_line_color = None
    p.xgrid.grid_line_alpha = 0.4
    p.outline_line_color = None

    gaps = _gap_source(profile, data, notes)
    gap_src = ColumnDataSource(gaps, name="nbprof-gaps")
    p.quad(
        left="left", right="right", bottom="bottom", top="top", fill_color="color",
        fill_alpha=0.45, line_color=None,
        source=gap_src, name="nbprof-gap-glyphs",
    )  # fmt: skip
    order = _label_gaps(gaps, data.span)
    label_src = ColumnDataSource(
        {
            "x": [(gaps["left"][i] + gaps["right"][i]) / 2 for i in order],
            "y": [(gaps["top"][i] + gaps["bottom"][i]) / 2 for i in order],
            "text": [gaps["cause_label"][i] for i in order],
        },
        name="nbprof-gap-labels",
    )
    p.add_layout(
        LabelSet(x="x", y="y", text="text", source=label_src, text_font_size="9px",
                 text_align="center", text_baseline="middle", text_color="#7f4f24",
                 background_fill_color="white", background_fill_alpha=0.75)
    )  # fmt: skip

    full = (-pad, data.span + pad)
    if data.event_count <= cap:
        exact_cols = exact(data, *full)
        agg_cols = {c: [] for c in _EMPTY_AGG}
    else:
        exact_cols = {c: [] for c in _EMPTY_EXACT}
        agg_cols = aggregate(data, *full, _bins(len(data.lanes), agg_cap))
    detail = ColumnDataSource(exact_cols, name="nbprof-detail")
    agg = ColumnDataSource(agg_cols, name="nbprof-aggregate")
    drawn = exact_cols if data.event_count <= cap else agg_cols
    drawn_lane = np.rint(np.asarray(drawn["bottom"], dtype=np.float64) + BAR_HEIGHT / 2)
    gap_hover_src = ColumnDataSource(
        gap_hover(gaps, drawn["left"], drawn["right"], drawn_lane), name="nbprof-gap-hover"
    )
    # Invisible: only where a gap's tooltip may show (no event drawn there).
    gap_r = p.quad(
        left="left", right="right", bottom="bottom", top="top", fill_alpha=0.0,
        line_color=None, source=gap_hover_src, name="nbprof-gap-hover-glyphs",
    )  # fmt: skip
    agg_r = p.quad(
        left="left", right="right", bottom="bottom", top="top", fill_color="color",
        line_color=None, fill_alpha=0.9, source=agg, name="nbprof-aggregate-glyphs",
    )  # fmt: skip
    # One renderer per kind of event, each with the hover fields that apply to it.
    det_r = {
        kind: p.quad(
            left="left",
            right="right",
            bottom="bottom",
            top="top",
            fill_color="color",
            line_color="color",
            line_width=0.5,
            source=detail,
            view=CDSView(filter=GroupFilter(column_name="tip", group=kind)),
            name=f"nbprof-detail-glyphs-{kind}",
        )
        for kind in dict.fromkeys(TIP_KINDS.values())
    }
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

    ticks_u32, dur_u32, tick = _encode(data)
    sig_dtype = np.uint16 if len(data.sigs) <= np.iinfo(np.uint16).max + 1 else np.uint32
    store = ColumnDataSource(
        {"dx": ticks_u32, "dd": dur_u32, "sig": data.sig.astype(sig_dtype)}, name="nbprof-store"
    )
    sigs = ColumnDataSource(
        {
            "cls": data.sigs["cls"].to_numpy(dtype=np.uint8),
            **{
                c: data.sigs[c].astype(str).tolist()
                for c in ("name", "short", "full", "grid", "block", "occ", "op", "extra")
            },
        },
        name="nbprof-sigs",
    )
    maxdur = [
        float(data.dur[a:b].max()) if b > a else 0.0
        for a, b in zip(data.lane_offsets[:-1], data.lane_offsets[1:], strict=True)
    ]
    meta = {
        "offsets": data.lane_offsets.tolist(),
        "maxdur": maxdur,
        "tick": tick,
        "cap": int(cap),
        "agg_cap": int(agg_cap),
        "max_bins": MAX_BINS,
        "bar": BAR_HEIGHT,
        "colors": _COLOURS.tolist(),
        "labels": _LABELS.tolist(),
        "tips": _TIPS.tolist(),
        "lanes": [ln.label for ln in data.lanes],
    }
    update = CustomJS(
        args={
            "xr": x_range,
            "store": store,
            "sigs": sigs,
            "detail": detail,
            "agg": agg,
            "gaps": gap_src,
            "gaphover": gap_hover_src,
            "meta": meta,
        },
        code=_JS_UPDATE,
    )
    x_range.js_on_change("start", update)
    x_range.js_on_change("end", update)

    parts: list[Any] = [p]
    samples_fig = _samples_figure(profile, data, x_range, ticks, notes)
    if samples_fig is not None:
        parts.append(samples_fig)

    ov = figure(
        x_range=Range1d(*full),
        y_range=Range1d(nl - 0.5, -0.5),
        height=max(75, min(120, 8 * nl + 40)),
        sizing_mode="stretch_width",
        toolbar_location=None,
        tools="",
        name="nbprof-overview",
    )
    ov.quad(
        left="left", right="right", bottom="bottom", top="top", fill_color="color",
        line_color=None, source=ColumnDataSource(aggregate(data, *full, OVERVIEW_BINS)),
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
    return Timeline(
        layout=layout,
        figures=parts,
        data=data,
        classes=[keys[i] for i in present],
        gap_causes=[c for c, (label, _) in GAP_CAUSES.items() if label in set(gaps["cause_label"])],
        notes=notes,
    )


def _label_gaps(gaps: dict[str, list[Any]], span: float) -> list[int]:
    """The longest gaps that are wide enough to carry a label readably in the full view,
    at most one per tenth of the span on a lane (labels of narrower gaps would overlap)."""
    taken: dict[str, list[float]] = {}
    chosen: list[int] = []
    for i in np.argsort(-np.asarray(gaps["dur"], dtype=float)).tolist():
        if gaps["dur"][i] < span * 0.02 or len(chosen) == MAX_GAP_LABELS:
            break
        centre = (gaps["left"][i] + gaps["right"][i]) / 2
        near = taken.setdefault(gaps["lane"][i], [])
        if all(abs(centre - c) >= span * 0.1 for c in near):
            near.append(centre)
            chosen.append(i)
    return chosen


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


def _gap_source(profile: Profile, data: TimelineData, notes: list[str]) -> dict[str, list[Any]]:
    cols: dict[str, list[Any]] = {
        k: []
        for k in (
            "left",
            "right",
            "bottom",
            "top",
            "color",
            "dur",
            "cause_label",
            "cpu_work",
            "lane",
            "li",
        )
    }
    try:
        gaps = profile.diagnosis.tables.get("idle_gaps")
    except Exception as e:
        logger.warning("diagnosis unavailable for idle gaps: %s", e)
        return cols
    if gaps is None or not len(gaps):
        return cols
    lane_of = {ln.key: i for i, ln in enumerate(data.lanes)}
    g = gaps
    if len(g) > MAX_GAPS:
        notes.append(f"Showing the {MAX_GAPS:,} longest of {len(g):,} idle gaps.")
        g = g.nlargest(MAX_GAPS, "dur")
    for r in g.itertuples(index=False):
        lane = lane_of.get(("gpu", int(r.rank), str(r.device), int(r.stream)))
        if lane is None:
            continue
        label, colour = GAP_CAUSES.get(str(r.cause), GAP_CAUSES["other"])
        cols["left"].append(float(r.start) - data.t0)
        cols["right"].append(float(r.end) - data.t0)
        cols["bottom"].append(lane - 0.5)
        cols["top"].append(lane + 0.5)
        cols["color"].append(colour)
        cols["dur"].append(float(r.dur))
        cols["cause_label"].append(label)
        cols["cpu_work"].append(str(getattr(r, "cpu_work", "")) or "unknown")
        cols["lane"].append(data.lanes[lane].label)
        cols["li"].append(lane)
    return cols


def _samples_figure(
    profile: Profile, data: TimelineData, x_range: Any, ticks: Any, notes: list[str]
) -> Any:
    from bokeh.models import ColumnDataSource, HoverTool, Range1d
    from bokeh.palettes import Category10_10
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
        height=170,
        sizing_mode="stretch_width",
        tools="",
        toolbar_location=None,
        y_axis_label="%",
        name="nbprof-samples",
    )
    fig.title.text = f"NVML samples ({samples.source})"
    fig.xaxis.formatter = ticks
    colours = iter(Category10_10 * 4)
    renderers = []
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
            src = ColumnDataSource(
                {"x": x, "y": y, "what": [f"GPU {gpu}: {label} ({basis})"] * len(y)}
            )
            r = fig.line(
                "x",
                "y",
                source=src,
                line_width=1.5,
                color=next(colours),
                legend_label=f"GPU {gpu} {label}",
                name=f"nbprof-sample-{metric}-{gpu}",
            )
            renderers.append(r)
    if not renderers:
        return None
    fig.legend.click_policy = "hide"
    fig.legend.label_text_font_size = "9px"
    fig.legend.location = "top_left"
    fig.add_tools(HoverTool(renderers=renderers, tooltips=[("", "@what"), ("value", "@y{0.0} %")]))
    return fig
