"""Collecting a profile's (or a job's) events into the lanes of a timeline.

Lanes are ordered per rank: steps, annotations, CPU threads (top-level ops, then their CUDA
calls), then GPU streams. Each table of the trace becomes a frame of the store's
EVENT_COLUMNS (store.py), which :func:`nbprof.views.timeline.store.pack` packs.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from nbprof.views._style import CLASS_IDS
from nbprof.views.timeline.store import NA, Lane, TimelineData, empty_events, pack

if TYPE_CHECKING:
    from nbprof.job import Job
    from nbprof.result import Profile

logger = logging.getLogger(__name__)


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
        names = thread_names(threads, ops)
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
        ev = empty_events()
    return pack(ev, lanes, notes)


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
                    "grid": "?", "block": "?", "occ": "?", "op": "?", "extra": NA,
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
    ev = pd.concat(frames, ignore_index=True) if frames else empty_events()
    data = pack(ev, lanes, notes)
    gaps = pd.concat(gap_parts, ignore_index=True) if gap_parts else None
    if gaps is not None:
        gaps = gaps.sort_values("dur", ascending=False, kind="stable").reset_index(drop=True)
    return data, gaps if gaps is not None else pd.DataFrame()


def thread_names(threads: list[tuple[int, int]], ops: pd.DataFrame) -> dict[tuple[int, int], str]:
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
    d.update(grid=NA, block=NA, occ=NA, op=NA, extra=NA, bytes=np.nan, corr=-1)
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
        grid=NA, block=NA, occ=NA, op=NA, extra=t["cat"].astype(str).to_numpy(),
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
        grid=NA, block=NA, occ=NA, op=_unknown(op), extra=extra,
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
        extra=NA,
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
