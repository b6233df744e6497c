"""The timeline's event store: every event of every lane, packed for the browser.

Per lane, events are sorted by start; each has a start and a duration (µs since t0), an id
into a table of unique (class, name, grid, block, occupancy, op, extra, bytes) signatures,
and the index of the event it is linked to (a kernel's launching call, a launch's kernel).
The browser receives starts as per-lane delta ticks and links as per-lane differences
(:func:`encode_ticks`, :func:`encode_links`; js/lod.mjs decodes both), so a training loop's
repeated events cost a few bytes each once compressed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from nbprof.views._style import CLASS_IDS, short_name

#: Hover value of a field that does not apply to the event (a CPU op has no grid).
NA = "—"
#: Columns of the per-table event frames :func:`pack` takes.
EVENT_COLUMNS = (
    "lane", "ts", "dur", "cls", "name", "grid", "block", "occ", "op", "extra", "bytes", "corr",
)  # fmt: skip
#: Columns of the signature table, in the order their codes are combined.
SIG_COLUMNS = ("cls", "name", "grid", "block", "occ", "op", "extra", "bytes")
#: Marks "no link" in the delta-encoded link array (js/lod.mjs NO_LINK).
NO_LINK = -(2**31)


@dataclass
class Lane:
    label: str
    kind: str  # "steps" | "annotations" | "cpu_ops" | "runtime" | "gpu"
    key: tuple[Any, ...]

    @property
    def rank(self) -> int:
        return int(self.key[1])


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

    def lane_maxdur(self) -> list[float]:
        """Per lane, its longest event (µs): how far before a window an event may start and
        still reach into it (js/lod.mjs bounds)."""
        return [
            float(self.dur[a:b].max()) if b > a else 0.0
            for a, b in zip(self.lane_offsets[:-1], self.lane_offsets[1:], strict=True)
        ]


def empty_events() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="object") for c in EVENT_COLUMNS})


def pack(ev: pd.DataFrame, lanes: list[Lane], notes: list[str]) -> TimelineData:
    """The store of the events ``ev`` (EVENT_COLUMNS; ``lane`` indexes ``lanes``)."""
    n = len(ev)
    sig_cols = list(SIG_COLUMNS)
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
    rank = np.array([ln.rank for ln in lanes], dtype=np.int64)[lane]
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


def tick_of(span: float) -> float:
    """The length of one tick in µs: 1 ns while the span fits in 2**32 ns (~4.3 s), else
    span / 2**32, so starts keep ns precision on short runs and stay within 1e-9 of the
    span on long ones."""
    return max(1e-3, span / 4.0e9)


def encode_ticks(data: TimelineData) -> tuple[np.ndarray, np.ndarray, float]:
    """Delta start ticks and duration ticks (uint32), and the tick length in µs."""
    tick = tick_of(data.span)
    ticks = np.rint(data.x / tick).astype(np.int64)
    deltas = np.diff(ticks, prepend=0)
    starts = data.lane_offsets[:-1][data.lane_offsets[:-1] < data.lane_offsets[1:]]
    deltas[starts] = ticks[starts]  # each lane restarts from t0
    dur = np.clip(np.rint(data.dur / tick), 0, np.iinfo(np.uint32).max)
    return deltas.clip(0, np.iinfo(np.uint32).max).astype(np.uint32), dur.astype(np.uint32), tick


def encode_links(link: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Links as per-lane differences to the previous linked event's partner (int32), with
    NO_LINK for events without one; js/lod.mjs decodeLinks inverts it."""
    out = np.full(len(link), NO_LINK, dtype=np.int64)
    for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True):
        part = link[a:b]
        has = np.flatnonzero(part >= 0)
        if not len(has):
            continue
        partners = part[has]
        out[a + has] = np.diff(partners, prepend=0)
    return out.astype(np.int32)
