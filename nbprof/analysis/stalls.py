"""Where one device's GPU span went: what ran, and why the GPU sat idle the rest of it.

The span is cut into disjoint time, so every share below adds up to 100% of it:

- ``compute``: at least one kernel other than a collective ran;
- ``exposed_comm``: only collectives ran (nothing hid them);
- ``possible_comm``: only collectives and kernels that behave as communication kernels do
  ran (:func:`~nbprof.analysis.classes.possible_comm`: no name says so; not compute);
- ``copy_only``: only copies or memsets ran;
- idle: nothing ran. Each idle gap of the whole device (the union over its streams) is
  cut in two at the moment the earliest work still waiting to start had been launched
  (its launch call had returned): before it nothing was queued and the GPU waited for
  the host; from it to the gap's end, launched work had not started, and the GPU waited
  on something else. The queued part is measured over the whole gap, not read from the
  queue at the instant the GPU went idle: kernels launched 0.3 ms into a 460 ms wait on
  an event make 459.7 ms of queued idle time.

  The queued part is charged to what the queued work waited on:

  ``kernel_wait`` under :data:`KERNEL_WAIT_US`: the GPU's own delay between queued work
                  and its start (back-to-back kernels, the launch latency);
  ``comm_wait``   the work that ended the gap is a collective kernel: the GPU waited to
                  communicate (the collective had been launched and was held back);
  ``dependency``  anything else: waiting on work outside the trace. Nothing ran on any
                  stream of the device meanwhile, so no work the trace shows on it can be
                  what the queued work waited for: it is another rank or process, a
                  host-side callback, an event recorded outside the profiled window, or
                  GPU work the profiler did not record.

  A host blocked in a synchronize or a blocking copy during the queued part is a
  consequence (it waits for that same queue), never the cause: that time is not
  ``sync``. The part before any work was queued goes to what the host was doing:

  ``sync``        blocked in a synchronize, a blocking copy or ``.item()`` (only the
                  blocked time: once the call returns, the time is charged to what the
                  host does next);
  ``capture``     recording a CUDA/HIP graph (stream capture: its launches are recorded,
                  not run);
  ``input``       in the input pipeline: a DataLoader fetch or CPU preprocessing (image
                  transforms, tokenizers, numpy/scipy in the input path,
                  :mod:`nbprof.analysis.inputs`);
  ``setup``       in a set-up call (allocation, context creation, a first launch loading
                  the kernel's code);
  ``host``        anything else: Python, the framework's per-op work, the launch calls;
  ``unknown``     the work that ended the gap has no launch record, so whether the host
                  was late cannot be told.

The host activity is the rank's (every thread of the process that drove the device).
"""

from __future__ import annotations

import bisect
import logging
import math
import re
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
    "sync", "dependency", "comm_wait", "kernel_wait", "capture", "input", "setup", "host",
    "unknown",
)  # fmt: skip
GAP_COLUMNS: tuple[str, ...] = STALLS_TABLE.names
#: The span_breakdown keys of time when something ran (the rest is idle, by cause).
RAN: tuple[str, ...] = ("compute", "exposed_comm", "possible_comm", "copy_only")


@dataclass(frozen=True)
class HostActivity:
    """What the host of one rank was doing, as interval sets and labelled calls."""

    #: Blocking calls: ts, dur, name (label).
    blocking: pd.DataFrame
    #: The input pipeline's host time (DataLoader fetches, CPU preprocessing).
    fetch: iv.Set
    #: Set-up calls: ts, dur, name.
    setup: pd.DataFrame
    #: Top-level CPU ops: ts, dur, name.
    top_ops: pd.DataFrame
    #: Stream-capture windows.
    capture: iv.Set = iv.EMPTY
    #: The input pipeline's calls (ts, dur, name) behind ``fetch``, to name them; None
    #: names every one "DataLoader __next__".
    input_calls: pd.DataFrame | None = None
    block_set: iv.Set = field(init=False)
    _blocked: _Calls = field(init=False, repr=False)
    _setup: _Calls = field(init=False, repr=False)
    _ops: _Calls = field(init=False, repr=False)
    _inputs: _Calls | None = field(init=False, repr=False)
    #: After each blocking call, a window as long as the block: a block of B µs drained
    #: the queue, so the idle time right after it is where the host restarts it. Not a
    #: cause (that time is charged to what the host did), only a fact to report.
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
        object.__setattr__(self, "_setup", _Calls.of(self.setup))
        inputs = self.input_calls
        object.__setattr__(
            self, "_inputs", _Calls.of(inputs) if inputs is not None and len(inputs) else None
        )
        object.__setattr__(self, "_ops", _Calls.of(self.top_ops))
        object.__setattr__(self, "block_set", iv.merge(s, e))
        object.__setattr__(self, "release_set", iv.merge(e, e + (e - s)))
        ss = _frames.column(self.setup, "ts", "float64")
        object.__setattr__(
            self, "setup_set", iv.merge(ss, ss + _frames.column(self.setup, "dur", "float64"))
        )
        sets = (self.block_set, self.capture, self.fetch, self.setup_set)
        object.__setattr__(self, "_lists", [(x[0].tolist(), x[1].tolist()) for x in sets])

    def describe(self, a: float, b: float) -> str:
        """What the host did during [a, b]: of the parts charged as :func:`account` does
        (blocked, capturing, input pipeline, set-up, the rest), the largest;
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
        if best == "capture":
            return "recording a CUDA graph (stream capture)"
        if best == "fetch":
            named = self._inputs.covering(a, b) if self._inputs is not None else ""
            if not named or _DATALOADER.search(named):
                return "DataLoader __next__"
            return f"input: {named}"
        if best == "setup":
            return f"set-up: {self._setup.covering(a, b)}"
        # The rest: the top-level op covering the most of it, if enough to name it.
        op = ""
        if rest:
            lo, hi = rest[0][0], rest[-1][1]
            op = self._ops.covering(lo, hi, at_least=OP_COVER * length)
        return op or "python"


#: describe()'s shares after "blocked", in the order they are weighed.
_SHARES = ("capture", "fetch", "setup", "rest")


def _take(
    pieces: list[tuple[float, float]], ws: list[float], we: list[float]
) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """(the parts of ``pieces`` inside the set of intervals ``ws``-``we``, the parts
    outside it): what ``iv.intersect`` and ``iv.subtract`` give for these sorted, disjoint
    pieces."""
    inside: list[tuple[float, float]] = []
    outside: list[tuple[float, float]] = []
    # Both sorted and disjoint: one sweep, each interval passed once (a piece only meets
    # the intervals from the first that ends after it starts).
    j, n = 0, len(ws)
    for s, e in pieces:
        while j < n and we[j] <= s:
            j += 1
        cur = s
        k = j
        while k < n and ws[k] < e:
            lo, hi = max(s, ws[k]), min(e, we[k])
            inside.append((lo, hi))
            if lo > cur:
                outside.append((cur, lo))
            cur = hi
            k += 1
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
        self._ok = ok
        #: The names sorted and each interval's place among them, made on the first numpy
        #: search (None: not yet).
        self._coded: tuple[np.ndarray, np.ndarray] | None = None

    def _codes(self) -> tuple[np.ndarray, np.ndarray]:
        if self._coded is None:
            # Hashed once (a trace's thousands of ops hold a few hundred names), then the
            # distinct names sorted: what np.unique gives, without sorting every call.
            first, seen = pd.factorize(self.names, use_na_sentinel=False)
            seen = np.asarray(seen, dtype=object)
            order = np.argsort(seen, kind="stable")
            place = np.empty(len(order), dtype=np.intp)
            place[order] = np.arange(len(order))
            self._coded = (seen[order], place[first])
        return self._coded

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
        if self._ok and hi - lo > _NUMPY_FROM:
            # Over many calls (an idle spell across a step's ops): each name's overlaps
            # added by its place among all the names, sorted once, not sorted again for
            # each window; the same sums in the same order, the same first of the largest.
            uniq, all_codes = self._codes()
            by = np.bincount(all_codes[lo:hi][m], weights=ov, minlength=len(uniq))
            best = int(by.argmax())
            return str(uniq[best]) if float(by[best]) >= at_least else ""
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
    input_calls: pd.DataFrame | None = None,
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
    return HostActivity(blocking, fetch, setup, top, capture, input_calls)


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
    #: Blocking-call name -> µs of queued idle time (``dependency``/``comm_wait``) the host
    #: spent blocked in it: waiting on that same queue, a consequence, not a cause.
    blocked_behind: dict[str, float] = field(default_factory=dict)
    #: Idle µs charged to the host or the input pipeline that followed a blocking call
    #: within its own length: the host restarting a queue the block had drained.
    drained_us: float = 0.0
    #: µs of ``dependency`` time whose queued work was a CUDA/HIP graph's (launched by a
    #: graph launch): a replay that paused between or before its nodes.
    graph_wait_us: float = 0.0
    #: µs when only kernels that behave as communication (and collectives) ran.
    possible_comm_us: float = 0.0

    def pct(self, us: float) -> float:
        return us / self.span_us * 100.0 if self.span_us > 0 else 0.0


@dataclass(frozen=True)
class _Pending:
    """Per idle gap: when the earliest work still to start had been queued (its launch
    call returned; inf when nothing launched had yet to start), and the work that ended
    the gap (its row in the events; -1 at the span's end)."""

    earliest: np.ndarray
    closer: np.ndarray
    closer_known: np.ndarray  # the launch of the work that ended the gap is known


def _pending(ev: pd.DataFrame, gaps: iv.Set) -> _Pending:
    n = len(gaps[0])
    if not n:
        z = np.zeros(0)
        return _Pending(z, np.zeros(0, np.intp), np.zeros(0, bool))
    order = np.argsort(_frames.column(ev, "ts", "float64"), kind="stable")
    ts = _frames.column(ev, "ts", "float64")[order]
    queued_at = "launch_end" if "launch_end" in ev.columns else "launch_ts"
    launch = _frames.column(ev, queued_at, "float64")[order]
    known = ~np.isnan(launch)
    # Nothing starts inside a gap, so the work still to start during gap [g0, g1) is the
    # work starting at or after g1: the earliest of its launches is when the queue filled.
    suffix = np.minimum.accumulate(np.where(known, launch, np.inf)[::-1])[::-1]
    suffix = np.concatenate((suffix, [np.inf]))
    j = np.searchsorted(ts, gaps[1], side="left")
    closer = np.where(j < len(order), order[np.minimum(j, len(order) - 1)], -1)
    closer_known = np.concatenate((known, [False]))[j]
    return _Pending(suffix[j], closer, closer_known)


def _charged(calls: pd.DataFrame, blocked: iv.Set) -> dict[str, float]:
    """Idle µs charged to each blocking call name: the part of ``blocked`` its calls
    cover. Calls nest (``.item()`` holds a copy and a synchronize), so each piece of idle
    time goes to one name only: the names that explain the most take their share first."""
    if calls.empty or not len(blocked[0]):
        return {}
    s = _frames.column(calls, "ts", "float64")
    e = s + _frames.column(calls, "dur", "float64")
    names = _frames.column(calls, "name")
    if not _group.all_text(names):  # as text, what astype(str) gives
        names = calls["name"].astype(str).to_numpy()
    # Every call cut by the set at once, each name's pieces merged.
    during = _cut(s, e, names, blocked)
    own: dict[str, iv.Set] = {}
    for n in dict.fromkeys(names):
        m = during[2] == n
        own[n] = iv.merge(during[0][m], during[1][m])
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


_GRAPH_LAUNCH = re.compile(r"GraphLaunch")
#: A DataLoader fetch's name (its op, annotation or Python frame) among the input calls.
_DATALOADER = re.compile(r"DataLoader|dataloader\.py\(\d+\): __next__", re.IGNORECASE)


def account(
    events: pd.DataFrame,
    collective: np.ndarray,
    host: HostActivity,
    rank: int,
    device: str,
    waits: pd.DataFrame | None = None,
    possible: np.ndarray | None = None,
) -> Accounting:
    """Cut one device's GPU span into what ran and why it idled.

    ``events``: the device's kernels, copies and memsets (ts, dur, launch_ts, launch_end
    when the launch call returned, table ``"kernel"``/``"memcpy"``/``"memset"``, and
    optionally stream, name, launch_name); ``collective`` marks its collective kernels;
    ``waits``: its streams' "Stream Wait Event" records (stream, ts, wait_on_stream), to
    name what queued work waited on; ``possible`` marks kernels that are possibly
    communication (their time alone is ``possible_comm``, not compute).
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
    maybe = (
        np.asarray(possible, dtype=bool) & is_kernel & ~comm
        if possible is not None and len(possible) == len(ts)
        else np.zeros(len(ts), bool)
    )
    work = is_kernel & ~comm & ~maybe
    compute = iv.merge(ts[work], end[work])
    comm_set = iv.merge(ts[comm], end[comm])
    compute_us, comm_us = iv.total(compute), iv.total(comm_set)
    exposed_comm_us = iv.total(iv.subtract(comm_set, compute))
    possible_comm_us = 0.0
    if maybe.any():
        alone = iv.subtract(iv.merge(ts[maybe], end[maybe]), compute)
        possible_comm_us = iv.total(iv.subtract(alone, comm_set))
    del compute, comm_set, end
    idle = iv.gaps(every, t0, t1)
    del every
    g0, g1 = idle
    dur = g1 - g0
    pend = _pending(events, idle)
    # The queued part of each gap: from when its earliest waiting work was queued.
    qs = np.clip(pend.earliest, g0, g1)
    qlen = g1 - qs
    has_q = qlen > 0
    short = qlen < KERNEL_WAIT_US
    has_closer = pend.closer >= 0
    closer = np.where(has_closer, pend.closer, 0)
    closer_comm = has_closer & comm[closer] if len(comm) else np.zeros(len(g0), bool)
    long_q = has_q & ~short
    blocked_behind = _charged(host.blocking, iv.intersect((qs[long_q], g1[long_q]), host.block_set))
    graph_wait_us = 0.0
    if "launch_name" in events.columns and long_q.any():
        names = _frames.column(events, "launch_name", object)[closer]
        graph = np.array([bool(_GRAPH_LAUNCH.search(str(n))) for n in names[long_q]], bool)
        graph_wait_us = float(qlen[long_q][graph & ~closer_comm[long_q]].sum())

    # The part before any work was queued, cut in turn by each of the host's sets, each
    # taking its part of what the ones before it left.
    open_ = qs > g0
    rest: iv.Set = (g0[open_], qs[open_])
    blocked = iv.intersect(rest, host.block_set)
    rest = iv.subtract(rest, host.block_set)
    blockers = _charged(host.blocking, blocked)
    per_sync = iv.per_interval(blocked, idle)
    del blocked
    capture = iv.intersect(rest, host.capture)
    rest = iv.subtract(rest, host.capture)
    per_capture = iv.per_interval(capture, idle)
    del capture
    fetch = iv.intersect(rest, host.fetch)
    rest = iv.subtract(rest, host.fetch)
    per_input = iv.per_interval(fetch, idle)
    setup = iv.intersect(rest, host.setup_set)
    rest = iv.subtract(rest, host.setup_set)
    per_setup = iv.per_interval(setup, idle)
    per_rest = iv.per_interval(rest, idle)
    drained_us = 0.0
    if len(host.release_set[0]):
        drained_us = iv.total(iv.intersect(fetch, host.release_set)) + iv.total(
            iv.intersect(rest, host.release_set)
        )
    del rest, fetch

    cause_us = {
        "sync": per_sync,
        "dependency": np.where(~short & ~closer_comm, qlen, 0.0),
        "comm_wait": np.where(~short & closer_comm, qlen, 0.0),
        "kernel_wait": np.where(short, qlen, 0.0),
        "capture": per_capture,
        "input": per_input,
        "setup": per_setup,
        "host": np.where(pend.closer_known, per_rest, 0.0),
        "unknown": np.where(pend.closer_known, 0.0, per_rest),
    }
    del per_rest, per_sync, per_capture, per_input, per_setup
    causes = {c: float(cause_us[c].sum()) for c in CAUSES}
    main = _CAUSE_WORDS[_first_largest([cause_us[c] for c in CAUSES])] if len(dur) else []
    del cause_us
    queue = _Queue(events, pend.closer, qs, comm, host, waits)
    return Accounting(
        span_us=span_us,
        compute_us=compute_us,
        exposed_comm_us=exposed_comm_us,
        comm_us=comm_us,
        copy_only_us=copy_only_us,
        idle_us=float(dur.sum()),
        queued_idle_us=float(qlen.sum()),
        setup_idle=setup,
        causes=causes,
        blockers=blockers,
        gaps=_gap_table(idle, dur, qlen, main, host, rank, device, queue),
        blocked_behind=blocked_behind,
        drained_us=drained_us,
        graph_wait_us=graph_wait_us,
        possible_comm_us=possible_comm_us,
    )


class _Queue:
    """What the queued work of a gap waited on, in words, for the gaps that are named."""

    def __init__(
        self,
        events: pd.DataFrame,
        closer: np.ndarray,
        queued_from: np.ndarray,
        comm: np.ndarray,
        host: HostActivity,
        waits: pd.DataFrame | None,
    ) -> None:
        self.events, self.closer, self.queued_from = events, closer, queued_from
        self.comm, self.host = comm, host
        self.waits = waits if waits is not None and len(waits) else None

    def describe(self, i: int, cause: str, g1: float) -> str:
        c = int(self.closer[i])
        if cause == "kernel_wait" or c < 0:
            return "queued work: the GPU's own delay before starting it"
        ev = self.events
        stream = _value(ev, "stream", c)
        name = _short(str(_value(ev, "name", c) or ""))
        on = f" on stream {stream}" if stream is not None else ""
        if cause == "comm_wait" or self.comm[c]:
            return f"queued behind {name}{on}, a collective held back"
        what = "work outside the trace"
        target = self._waited_on(stream, _value(ev, "launch_ts", c))
        if target is not None:
            what = f"an event of stream {target} ({what})"
        graph = (
            ""
            if not _GRAPH_LAUNCH.search(str(_value(ev, "launch_name", c) or ""))
            else (" (a CUDA/HIP graph's)")
        )
        text = f"queued work{on}{graph} waiting on {what}"
        blocked = self.host._blocked.covering(float(self.queued_from[i]), g1)
        if blocked:
            text += f"; host blocked in {blocked} meanwhile"
        return text

    def _waited_on(self, stream: Any, launch_ts: Any) -> int | None:
        """The stream whose event ``stream`` last waited on before ``launch_ts``."""
        w = self.waits
        if w is None or stream is None or launch_ts is None or np.isnan(float(launch_ts)):
            return None
        mine = np.flatnonzero(
            (_frames.column(w, "stream") == stream)
            & (_frames.column(w, "ts", "float64") <= float(launch_ts))
        )
        if not len(mine):
            return None
        last = mine[np.argmax(_frames.column(w, "ts", "float64")[mine])]
        target = int(_frames.column(w, "wait_on_stream")[last])
        return target if target >= 0 else None


def _value(frame: pd.DataFrame, column: str, row: int) -> Any:
    return _frames.column(frame, column)[row] if column in frame.columns else None


def _short(name: str, most: int = 48) -> str:
    return name if len(name) <= most else name[: most - 1] + "…"


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
    queue: _Queue,
) -> pd.DataFrame:
    """The idle gaps, largest first (ties in time order), the largest ``NAMED_GAPS`` with
    the host's work (or what the queued work waited on) during them: built once, in that
    order. ``queued``: each gap's µs with work queued."""
    if not len(dur) or np.isnan(dur).any():
        return _gap_table_sorted(idle, dur, queued, main, host, rank, device, queue)
    order = _group.largest_first(dur)  # what pandas' stable descending sort gives
    cause_of, g0, g1 = np.asarray(main)[order], idle[0][order], idle[1][order]
    work = _gap_work(cause_of, g0, g1, host, queue, order)
    q = queued[order]
    return _frames.frame(
        {
            "rank": np.full(len(dur), rank, dtype="int32"),
            "device": np.full(len(dur), device, dtype=object),
            "start": g0,
            "end": g1,
            "dur": dur[order],
            "queued": q > 0,
            "queued_us": q,
            "cause": cause_of,
            "cpu_work": np.array(work, dtype=object),
        },
        own=True,  # every column made here
    )


_QUEUED_CAUSES = frozenset({"dependency", "comm_wait", "kernel_wait"})


def _gap_work(
    cause_of: Any, g0: Any, g1: Any, host: HostActivity, queue: _Queue, at: Any
) -> list[str]:
    """What the host did, or what the queued work waited on, during each of the largest
    ``NAMED_GAPS`` gaps (given largest first; ``at``: each one's place among the gaps in
    time order); "" for the rest."""
    work = [""] * len(cause_of)
    for i in range(min(NAMED_GAPS, len(cause_of))):
        if cause_of[i] in _QUEUED_CAUSES:
            work[i] = queue.describe(int(at[i]), str(cause_of[i]), float(g1[i]))
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
    queue: _Queue,
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
            "queued": np.asarray(queued) > 0,
            "queued_us": np.asarray(queued, dtype="float64"),
            "cause": np.asarray(main, dtype=object),
            "cpu_work": np.full(len(dur), "", dtype=object),
        }
    )
    gaps = gaps.sort_values("dur", ascending=False, kind="stable")
    at = gaps.index.to_numpy()
    gaps = gaps.reset_index(drop=True)
    # Read and written as arrays: a cell at a time through .at costs more than the describing.
    cause_of, g0, g1 = (_frames.column(gaps, c) for c in ("cause", "start", "end"))
    work = _gap_work(cause_of, g0, g1, host, queue, at)
    if work:
        gaps["cpu_work"] = pd.Series(work, index=gaps.index, dtype=object)
    return gaps[list(GAP_COLUMNS)]
