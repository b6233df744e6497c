"""Where one device's GPU span went: what ran, and why the GPU sat idle the rest of it.

The span is cut into disjoint time, so every share below adds up to 100% of it:

- ``compute``: at least one kernel other than a collective ran;
- ``exposed_comm``: only collectives ran (nothing hid them);
- ``copy_only``: only copies or memsets ran;
- idle: nothing ran. Each idle gap of the whole device (the union over its streams) is
  then charged to a cause, from what was queued and what the host was doing:

  ``sync``        the host was blocked in a synchronize, a blocking copy or ``.item()``
                  during the gap, or had just returned from one: a block of B µs drained
                  the queue, so up to B µs of the idle time after it are the block's (had
                  the host not waited, it would have been B µs further ahead). A 1 µs
                  synchronize explains 1 µs of a 100 ms gap, not the gap;
  ``dependency``  work had been queued before the gap opened but did not start: it waited
                  on something else (an event on another stream, a peer rank);
  ``kernel_wait`` the same, but shorter than :data:`KERNEL_WAIT_US`: the normal delay
                  between back-to-back queued kernels;
  ``capture``     nothing was queued and the host was recording a CUDA/HIP graph (stream
                  capture: its launches are recorded, not run);
  ``input``       nothing was queued and the host was fetching a batch (DataLoader);
  ``setup``       nothing was queued and the host was in a set-up call (allocation,
                  context creation, a first launch loading the kernel's code);
  ``host``        nothing was queued and the host was doing anything else: Python, the
                  framework's per-op work, the launch calls themselves;
  ``unknown``     nothing known was queued but the work that ended the gap has no launch
                  record, so whether the host was late cannot be told.

The host activity is the rank's (every thread of the process that drove the device).
"""

from __future__ import annotations

import bisect
import logging
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from nbprof.analysis import _frames, _group
from nbprof.analysis import intervals as iv
from nbprof.analysis._text import is_in, name_column
from nbprof.analysis.model import STALLS_TABLE
from nbprof.analysis.syncs import SYNC_OPS
from nbprof.trace.model import frame_from_arrays

logger = logging.getLogger(__name__)

#: Idle gaps with work queued that are shorter than this (µs) are the GPU's own delay
#: between back-to-back queued work (1-4 µs between kernels of one stream on current
#: NVIDIA GPUs, more between graph nodes and on AMD GPUs), not a wait on another stream
#: or a peer, which takes from tens of µs to milliseconds. HolisticTraceAnalysis uses the
#: same 30: it documents its ``consecutive_kernel_delay`` default as 30 ns, but compares
#: it with its traces' microsecond times, so it acts as 30 µs.
KERNEL_WAIT_US = 30.0
#: How many of the largest idle gaps get the host's work during them named.
NAMED_GAPS = 50
#: A top-level op names a gap's host work when it covers at least this share of the gap.
OP_COVER = 0.25
CAUSES: tuple[str, ...] = (
    "sync", "dependency", "kernel_wait", "capture", "input", "setup", "host", "unknown",
)  # fmt: skip
GAP_COLUMNS: tuple[str, ...] = STALLS_TABLE.names


@dataclass(frozen=True)
class HostActivity:
    """What the host of one rank was doing, as interval sets and labelled calls."""

    #: Blocking calls: ts, dur, name (label).
    blocking: pd.DataFrame
    #: DataLoader fetches.
    fetch: iv.Set
    #: Set-up calls: ts, dur, name.
    setup: pd.DataFrame
    #: Top-level CPU ops: ts, dur, name.
    top_ops: pd.DataFrame
    #: Stream-capture windows.
    capture: iv.Set = iv.EMPTY
    block_set: iv.Set = field(init=False)
    _blocked: _Calls = field(init=False, repr=False)
    _released: _Calls = field(init=False, repr=False)
    _setup: _Calls = field(init=False, repr=False)
    _ops: _Calls = field(init=False, repr=False)
    release_set: iv.Set = field(init=False)
    setup_set: iv.Set = field(init=False)
    #: describe()'s answers: a device's idle gaps and its streams' gaps are often the same
    #: windows, and each is asked about once for the time accounting, once for the lanes.
    _described: dict[tuple[float, float], str] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )
    #: The five sets describe() cuts a gap by, as lists (bisect on a list is cheaper than a
    #: numpy search for the one window each question asks about).
    _lists: list[tuple[list[float], list[float]]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        s = _frames.column(self.blocking, "ts", "float64")
        e = s + _frames.column(self.blocking, "dur", "float64")
        names = _call_names(self.blocking)
        object.__setattr__(self, "_blocked", _Calls(s, e, names))
        # A block's release window: as long as the block, from its end.
        object.__setattr__(self, "_released", _Calls(e, e + (e - s), names))
        object.__setattr__(self, "_setup", _Calls.of(self.setup))
        object.__setattr__(self, "_ops", _Calls.of(self.top_ops))
        object.__setattr__(self, "block_set", iv.merge(s, e))
        object.__setattr__(self, "release_set", iv.merge(e, e + (e - s)))
        ss = _frames.column(self.setup, "ts", "float64")
        object.__setattr__(
            self, "setup_set", iv.merge(ss, ss + _frames.column(self.setup, "dur", "float64"))
        )
        sets = (self.block_set, self.release_set, self.capture, self.fetch, self.setup_set)
        object.__setattr__(self, "_lists", [(x[0].tolist(), x[1].tolist()) for x in sets])

    def describe(self, a: float, b: float) -> str:
        """What the host did during [a, b]: of the parts charged as :func:`account` does
        (blocked, just released, capturing, DataLoader, set-up, the rest), the largest;
        the rest is named after the top-level op covering at least ``OP_COVER`` of the gap,
        else ``python`` (no op recorded: untraced Python)."""
        key = (float(a), float(b))
        got = self._described.get(key)
        if got is None:
            got = self._described[key] = self._describe(key[0], key[1])
        return got

    def _describe(self, a: float, b: float) -> str:
        length = b - a
        if length <= 0:
            return ""
        # The host's sets are long; only their intervals near the gap matter, and those
        # are a handful: cut the gap in plain Python (the same pieces intersect and
        # subtract give, without their per-call cost), each set taking its part of what
        # the earlier ones left.
        rest: list[tuple[float, float]] = [(a, b)]
        taken: list[float] = []
        for xs, xe in self._lists:
            # iv.window: the intervals overlapping [a, b) (starts and ends both sorted).
            i0, i1 = bisect.bisect_right(xe, a), bisect.bisect_left(xs, b)
            if i0 >= i1:  # none: nothing taken, the rest as it was (most sets, most gaps)
                taken.append(0.0)
                continue
            inside, rest = _take(rest, xs[i0:i1], xe[i0:i1])
            taken.append(_length(inside))
        # The largest share, the first of equal ones (what max over them in this order
        # gives), without a dict and a key function for each of a hundred gaps a rank.
        best, most = "blocked", taken[0]
        for name, share in zip(_SHARES, (*taken[1:], _length(rest)), strict=True):
            if share > most:
                best, most = name, share
        if best == "blocked":
            return f"blocked in {self._blocked.covering(a, b)}"
        if best == "after":
            return f"after {self._released.covering(a, b)}"
        if best == "capture":
            return "recording a CUDA graph (stream capture)"
        if best == "fetch":
            return "DataLoader __next__"
        if best == "setup":
            return f"set-up: {self._setup.covering(a, b)}"
        # The rest: the top-level op covering the most of it, if enough to name it.
        op = ""
        if rest:
            lo, hi = rest[0][0], rest[-1][1]
            op = self._ops.covering(lo, hi, at_least=OP_COVER * length)
        return op or "python"


#: describe()'s shares after "blocked", in the order they are weighed.
_SHARES = ("after", "capture", "fetch", "setup", "rest")


def _take(
    pieces: list[tuple[float, float]], ws: list[float], we: list[float]
) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """(the parts of ``pieces`` inside the set of intervals ``ws``-``we``, the parts
    outside it): what ``iv.intersect`` and ``iv.subtract`` give for these sorted, disjoint
    pieces."""
    inside: list[tuple[float, float]] = []
    outside: list[tuple[float, float]] = []
    for s, e in pieces:
        cur = s
        for x, y in zip(ws, we, strict=True):
            if y <= s or x >= e:
                continue
            lo, hi = max(s, x), min(e, y)
            inside.append((lo, hi))
            if lo > cur:
                outside.append((cur, lo))
            cur = hi
        if cur < e:
            outside.append((cur, e))
    return inside, outside


def _length(pieces: list[tuple[float, float]]) -> float:
    """``iv.total`` of the pieces, added as numpy adds them (in order below 8 terms)."""
    if len(pieces) < 8:
        total = 0.0
        for s, e in pieces:
            total += e - s
        return total
    return iv.total((np.array([s for s, _ in pieces]), np.array([e for _, e in pieces])))


def _call_names(calls: pd.DataFrame) -> np.ndarray:
    """The calls' names as text objects (``str()`` of any that are not), each the frame's
    own object: NumPy's fixed-width text would hold every name at the longest one's width,
    and its list a new object for each call (2.4 MiB for a trace's 6085 top-level ops)."""
    names = _frames.column(calls, "name")
    if names.dtype == object and _group.all_text(names):
        return names
    return np.array([str(n) for n in names.tolist()], dtype=object)


#: Calls near a window from which numpy, not plain Python, weighs them (numpy's fixed cost
#: of a dozen calls is about that of a loop over as many intervals).
_NUMPY_FROM = 64


#: Calls up to which _Calls keeps plain lists for its plain-Python search.
_LISTS_UP_TO = 4096


class _Calls:
    """Named intervals sorted by start, for asking which name covers most of a window."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray, names: np.ndarray) -> None:
        order = np.argsort(starts, kind="stable")
        self.s, self.e = starts[order], ends[order]
        self.names = names[order]
        self.longest = float((self.e - self.s).max()) if len(self.s) else 0.0
        ok = not (np.isnan(self.s).any() or np.isnan(self.e).any() or math.isnan(self.longest))
        # Latest end among the intervals up to each one: those before the first whose
        # running end passes a window's start all end before it. Starting the search
        # there, not at ``a - longest``, skips them: one long interval (a top-level op
        # around a whole step) would otherwise make every search walk back over all the
        # intervals of its length. Only where no time is missing (a NaN start or end
        # orders differently).
        reach = np.maximum.accumulate(self.e) if ok and len(self.e) else None
        # Plain lists for the plain-Python search, for up to _LISTS_UP_TO calls: a list
        # holds a float object per time, about 100 bytes a call in all, which a trace's
        # thousands of top-level ops would hold through the whole analysis.
        small = ok and len(self.s) <= _LISTS_UP_TO
        self._lists = (self.s.tolist(), self.e.tolist(), self.names.tolist()) if small else None
        self._reach: list[float] = reach.tolist() if small and reach is not None else []
        self._reach_at = None if small else reach

    @classmethod
    def of(cls, calls: pd.DataFrame) -> _Calls:
        s = _frames.column(calls, "ts", "float64")
        return cls(s, s + _frames.column(calls, "dur", "float64"), _call_names(calls))

    def covering(self, a: float, b: float, at_least: float = 0.0) -> str:
        """The name whose intervals cover the most of [a, b] (at least ``at_least``), or ""."""
        if self._lists is not None:
            return self._covering(a, b, at_least)
        if self._reach_at is not None:
            lo = int(np.searchsorted(self._reach_at, a, side="right"))
        else:
            # Only intervals starting after a - longest can overlap [a, b].
            lo = int(np.searchsorted(self.s, a - self.longest, side="left"))
        hi = int(np.searchsorted(self.s, b, side="left"))
        return self._covering_of(lo, hi, a, b, at_least)

    def _covering_of(self, lo: int, hi: int, a: float, b: float, at_least: float) -> str:
        """:meth:`covering` among the intervals ``lo`` to ``hi``, by numpy."""
        s, e = self.s[lo:hi], self.e[lo:hi]
        m = e > a
        if not m.any():
            return ""
        ov = np.minimum(e[m], b) - np.maximum(s[m], a)
        names, codes = np.unique(self.names[lo:hi][m], return_inverse=True)
        by = np.bincount(codes, weights=ov)
        best = int(by.argmax())
        return str(names[best]) if float(by[best]) >= at_least else ""

    def _covering(self, a: float, b: float, at_least: float) -> str:
        """:meth:`covering` in plain Python, on the few intervals near [a, b]: each name's
        overlaps added in start order (as ``np.bincount`` adds them), the first of the
        names in sorted order (``np.unique``'s) among those covering the most."""
        assert self._lists is not None
        s, e, names = self._lists
        lo = bisect.bisect_right(self._reach, a)
        hi = bisect.bisect_left(s, b)
        if hi - lo > _NUMPY_FROM:
            # A long gap over many calls (an idle spell between steps, spanning every op
            # of the host's step): numpy adds them in the same order, sooner.
            return self._covering_of(lo, hi, a, b, at_least)
        by: dict[str, float] = {}
        for i in range(lo, hi):
            if e[i] > a:
                ov = min(e[i], b) - max(s[i], a)
                n = names[i]
                by[n] = by.get(n, 0.0) + ov
        if not by:
            return ""
        best = ""
        most = -math.inf
        for n in sorted(by):
            if by[n] > most:
                best, most = n, by[n]
        return best if most >= at_least else ""


def host_activity(
    blocking: pd.DataFrame,
    fetch: iv.Set,
    setup: pd.DataFrame,
    cpu_ops: pd.DataFrame,
    capture: iv.Set = iv.EMPTY,
) -> HostActivity:
    if cpu_ops.empty:
        top = pd.DataFrame({"ts": [], "dur": [], "name": []})
    else:
        names = name_column(cpu_ops, "name")
        # .item() is blocking, already counted as such: never the op that "ran".
        sync = is_in(names, _SYNC_OPS)
        rows = np.flatnonzero((_frames.column(cpu_ops, "depth") == 0) & ~sync)
        ts, dur = _frames.column(cpu_ops, "ts")[rows], _frames.column(cpu_ops, "dur")[rows]
        if ts.dtype.kind in "iuf" and dur.dtype.kind in "iuf":
            # Numbers and object text, as the public constructor keeps them: built directly.
            top = frame_from_arrays(
                {"ts": ts, "dur": dur, "name": np.asarray(names[rows], dtype=object)}
            )
        else:
            top = pd.DataFrame({"ts": ts, "dur": dur, "name": pd.Series(names[rows], dtype=object)})
    # Only ts, dur and name are read from the call frames.
    return HostActivity(blocking, fetch, setup, top, capture)


_SYNC_OPS = frozenset(SYNC_OPS)


@dataclass(frozen=True)
class Accounting:
    """The span of one device cut into disjoint time (µs), and the idle time's causes."""

    span_us: float
    compute_us: float
    exposed_comm_us: float
    comm_us: float  # union of collective kernels, hidden or not
    copy_only_us: float
    idle_us: float
    queued_idle_us: float  # idle time with work queued (launched, not started)
    setup_idle: iv.Set  # the idle time charged to set-up calls, as intervals
    causes: dict[str, float]  # idle µs per cause (every key of CAUSES)
    blockers: dict[str, float]  # blocking-call name -> idle µs charged to it (disjoint)
    gaps: pd.DataFrame  # whole-device idle gaps, largest first (GAP_COLUMNS)

    def pct(self, us: float) -> float:
        return us / self.span_us * 100.0 if self.span_us > 0 else 0.0


def _queued_at_open(ev: pd.DataFrame, gaps: iv.Set) -> tuple[np.ndarray, np.ndarray]:
    """Per gap: was work queued when it opened (its launch call had returned before, and
    it started after), and is the launch of the work that ended it known."""
    n = len(gaps[0])
    if not n:
        return np.zeros(0, bool), np.zeros(0, bool)
    order = np.argsort(_frames.column(ev, "ts", "float64"), kind="stable")
    ts = _frames.column(ev, "ts", "float64")[order]
    queued_at = "launch_end" if "launch_end" in ev.columns else "launch_ts"
    launch = _frames.column(ev, queued_at, "float64")[order]
    known = ~np.isnan(launch)
    # Earliest launch among the events starting at or after each position.
    suffix = np.minimum.accumulate(np.where(known, launch, np.inf)[::-1])[::-1]
    suffix = np.concatenate((suffix, [np.inf]))
    j = np.searchsorted(ts, gaps[1], side="left")
    queued = suffix[j] < gaps[0]
    closer_known = np.concatenate((known, [False]))[j]
    return queued, closer_known


def _charged(calls: pd.DataFrame, blocked: iv.Set, released: iv.Set) -> dict[str, float]:
    """Idle µs charged to each blocking call name: the part of ``blocked`` its calls cover
    and the part of ``released`` their release windows cover. Calls nest (``.item()``
    holds a copy and a synchronize), so each piece of idle time goes to one name only: the
    names that explain the most take their share first."""
    if calls.empty:
        return {}
    s = _frames.column(calls, "ts", "float64")
    e = s + _frames.column(calls, "dur", "float64")
    names = _frames.column(calls, "name")
    if not _group.all_text(names):  # as text, what astype(str) gives
        names = calls["name"].astype(str).to_numpy()
    # A name's calls during ``blocked`` and its release windows during ``released``: the
    # union of each call (window) cut by the set is the union of the calls cut by it, so
    # every call is cut at once and each name's pieces merged, where each name's calls
    # were merged and intersected before (the same sets: their ends are the same values).
    during = _cut(s, e, names, blocked)
    after = _cut(e, e + (e - s), names, released)
    own: dict[str, iv.Set] = {}
    for n in dict.fromkeys(names):
        m1, m2 = during[2] == n, after[2] == n
        own[n] = iv.merge(
            np.concatenate((during[0][m1], after[0][m2])),
            np.concatenate((during[1][m1], after[1][m2])),
        )
    out: dict[str, float] = {}
    taken: iv.Set = iv.EMPTY
    for n in sorted(own, key=lambda k: -iv.total(own[k])):
        mine = iv.subtract(own[n], taken)
        if iv.total(mine) > 0:
            out[n] = iv.total(mine)
            taken = iv.merge(
                np.concatenate((taken[0], mine[0])), np.concatenate((taken[1], mine[1]))
            )
    return out


def _cut(
    s: np.ndarray, e: np.ndarray, names: np.ndarray, by: iv.Set
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The parts of the intervals inside the set ``by``, with each one's name; intervals
    ``iv.merge`` would drop (no length, a missing time) left out, as it leaves them."""
    ok = ~(np.isnan(s) | np.isnan(e)) & (e > s)
    if not len(by[0]) or not ok.any():
        return np.zeros(0), np.zeros(0), names[:0]
    ps, pe, at = iv.clip(s[ok], e[ok], by)
    return ps, pe, names[ok][at]


def account(
    events: pd.DataFrame,
    collective: np.ndarray,
    host: HostActivity,
    rank: int,
    device: str,
) -> Accounting:
    """Cut one device's GPU span into what ran and why it idled.

    ``events``: the device's kernels, copies and memsets (ts, dur, launch_ts, launch_end
    when the launch call returned, table ``"kernel"``/``"memcpy"``/``"memset"``);
    ``collective`` marks its collective kernels.
    """
    ts = _frames.column(events, "ts", "float64")
    end = ts + _frames.column(events, "dur", "float64")
    is_kernel = _frames.column(events, "table") == "kernel"
    comm = np.asarray(collective, dtype=bool) & is_kernel
    t0, t1 = (float(ts.min()), float(end.max())) if len(ts) else (0.0, 0.0)
    span_us = t1 - t0
    # Each set goes once what is read from it is taken: a device's analysis is at its
    # largest here, with a handful of gap-sized arrays for each step of the cut.
    every = iv.merge(ts, end)
    copy_only_us = iv.total(iv.subtract(every, iv.merge(ts[is_kernel], end[is_kernel])))
    compute = iv.merge(ts[is_kernel & ~comm], end[is_kernel & ~comm])
    comm_set = iv.merge(ts[comm], end[comm])
    compute_us, comm_us = iv.total(compute), iv.total(comm_set)
    exposed_comm_us = iv.total(iv.subtract(comm_set, compute))
    del compute, comm_set, end
    idle = iv.gaps(every, t0, t1)
    del every
    queued, closer_known = _queued_at_open(events, idle)
    dur = idle[1] - idle[0]

    def sub(mask: np.ndarray) -> iv.Set:
        return idle[0][mask], idle[1][mask]

    # The idle time cut in turn by each of the host's sets, each taking its part of what
    # the ones before it left.
    blocked = iv.intersect(idle, host.block_set)
    rest_q = iv.subtract(sub(queued), host.block_set)
    per_queued = iv.per_interval(rest_q, idle)
    del rest_q
    rest = iv.subtract(sub(~queued), host.block_set)
    after = iv.intersect(rest, host.release_set)
    rest = iv.subtract(rest, host.release_set)
    blockers = _charged(host.blocking, blocked, after)
    per_sync = iv.per_interval(blocked, idle) + iv.per_interval(after, idle)
    del blocked, after
    capture = iv.intersect(rest, host.capture)
    rest = iv.subtract(rest, host.capture)
    per_capture = iv.per_interval(capture, idle)
    del capture
    fetch = iv.intersect(rest, host.fetch)
    rest = iv.subtract(rest, host.fetch)
    per_input = iv.per_interval(fetch, idle)
    del fetch
    setup = iv.intersect(rest, host.setup_set)
    rest = iv.subtract(rest, host.setup_set)
    per_setup = iv.per_interval(setup, idle)
    per_rest = iv.per_interval(rest, idle)
    del rest

    short = dur < KERNEL_WAIT_US
    cause_us = {
        "sync": per_sync,
        "dependency": np.where(short, 0.0, per_queued),
        "kernel_wait": np.where(short, per_queued, 0.0),
        "capture": per_capture,
        "input": per_input,
        "setup": per_setup,
        "host": np.where(closer_known, per_rest, 0.0),
        "unknown": np.where(closer_known, 0.0, per_rest),
    }
    del per_queued, per_rest, per_sync, per_capture, per_input, per_setup, short
    causes = {c: float(cause_us[c].sum()) for c in CAUSES}
    main = _CAUSE_WORDS[_first_largest([cause_us[c] for c in CAUSES])] if len(dur) else []
    del cause_us
    return Accounting(
        span_us=span_us,
        compute_us=compute_us,
        exposed_comm_us=exposed_comm_us,
        comm_us=comm_us,
        copy_only_us=copy_only_us,
        idle_us=float(dur.sum()),
        queued_idle_us=float(dur[queued].sum()),
        setup_idle=setup,
        causes=causes,
        blockers=blockers,
        gaps=_gap_table(idle, dur, queued, main, host, rank, device),
    )


_CAUSE_WORDS = np.array(CAUSES, dtype=object)


def _first_largest(values: list[np.ndarray]) -> np.ndarray:
    """For each position, which of these equal-length arrays is largest there, the first
    of those tied: ``np.vstack(values).argmax(axis=0)`` (a NaN the largest, as argmax
    takes it), without the stacked copy of them all."""
    best = values[0].copy()
    which = np.zeros(len(best), dtype=np.intp)
    for i, v in enumerate(values[1:], start=1):
        # A later array wins where it is larger, or NaN where the best so far is not.
        wins = (v > best) | (np.isnan(v) & ~np.isnan(best))
        which[wins] = i
        best[wins] = v[wins]
    return which


def _gap_table(
    idle: iv.Set,
    dur: np.ndarray,
    queued: np.ndarray,
    main: Any,
    host: HostActivity,
    rank: int,
    device: str,
) -> pd.DataFrame:
    """The idle gaps, largest first (ties in time order), the largest ``NAMED_GAPS`` with
    the host's work during them: built once, in that order."""
    if not len(dur) or np.isnan(dur).any():
        return _gap_table_sorted(idle, dur, queued, main, host, rank, device)
    order = _group.largest_first(dur)  # what pandas' stable descending sort gives
    cause_of, g0, g1 = np.asarray(main)[order], idle[0][order], idle[1][order]
    work = _gap_work(cause_of, g0, g1, host)
    return _frames.frame(
        {
            "rank": np.full(len(dur), rank, dtype="int32"),
            "device": np.full(len(dur), device, dtype=object),
            "start": g0,
            "end": g1,
            "dur": dur[order],
            "queued": queued[order],
            "cause": cause_of,
            "cpu_work": np.array(work, dtype=object),
        },
        own=True,  # every column made here
    )


def _gap_work(cause_of: Any, g0: Any, g1: Any, host: HostActivity) -> list[str]:
    """What the host did during each of the largest ``NAMED_GAPS`` gaps (given largest
    first); "" for the rest."""
    work = [""] * len(cause_of)
    for i in range(min(NAMED_GAPS, len(cause_of))):
        if cause_of[i] in ("dependency", "kernel_wait"):
            work[i] = "queued work waiting on another stream or device"
        else:
            work[i] = host.describe(g0[i], g1[i])
    return work


def _gap_table_sorted(
    idle: iv.Set,
    dur: np.ndarray,
    queued: np.ndarray,
    main: Any,
    host: HostActivity,
    rank: int,
    device: str,
) -> pd.DataFrame:
    """:func:`_gap_table` by pandas' sort (no gaps, or gaps of unknown length)."""
    # Text as object, as _gap_table holds it.
    gaps = _frames.frame(
        {
            "rank": np.full(len(dur), rank, dtype="int32"),
            "device": np.full(len(dur), device, dtype=object),
            "start": idle[0],
            "end": idle[1],
            "dur": dur,
            "queued": queued,
            "cause": np.asarray(main, dtype=object),
            "cpu_work": np.full(len(dur), "", dtype=object),
        }
    )
    gaps = gaps.sort_values("dur", ascending=False, kind="stable").reset_index(drop=True)
    # Read and written as arrays: a cell at a time through .at costs more than the describing.
    cause_of, g0, g1 = (_frames.column(gaps, c) for c in ("cause", "start", "end"))
    work = _gap_work(cause_of, g0, g1, host)
    if work:
        gaps["cpu_work"] = pd.Series(work, index=gaps.index, dtype=object)
    return gaps[list(GAP_COLUMNS)]
