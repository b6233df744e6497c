"""The process-wide NVML sampler: one background thread, a bounded ring buffer, subscribers.

Threading contract (the kernel's main thread must never wait on NVML):

- NVML is only ever called on the sampler thread ("nbprof-nvml-sampler"), with no lock held.
- The lock guards the ring buffer and the subscriber set; it is held only to append one
  block or to copy references out, never across an NVML call or a subscriber callback.
- ``nvmlInit`` (which can take seconds when the driver is not persistent) runs on the sampler
  thread too, so :meth:`Sampler.subscribe` returns at once.
- Stopping joins the thread with a timeout (one NVML pass normally takes milliseconds); a
  thread stuck in the driver is daemonic and is left to the interpreter rather than
  hanging the user's cell.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from nbprof.telemetry.model import SAMPLE_COLUMNS, Samples
from nbprof.telemetry.nvml import METRIC_NAMES, Block, NvmlBackend

logger = logging.getLogger(__name__)

#: Default sampling period (4 Hz).
DEFAULT_PERIOD_S = 0.25
#: Shortest period honoured: NVML itself refreshes most readings no faster than this.
MIN_PERIOD_S = 0.05
#: Ring buffer size in sampling passes: one hour at 4 Hz.
DEFAULT_CAPACITY = 14_400
#: How far back :meth:`Subscription.latest` looks for each metric's last value.
LATEST_LOOKBACK_NS = 60_000_000_000
#: Name of the sampler thread (tests and the autouse fixture look for it).
THREAD_NAME = "nbprof-nvml-sampler"


@dataclass(frozen=True)
class Tick:
    """What subscribers' ``on_tick`` callbacks receive after each sampling pass."""

    time_ns: int
    block: Block
    #: True when gpus, reasons or unavailable changed since the previous tick.
    state_changed: bool


OnTick = Callable[[Tick], None]


class Subscription:
    """A handle on the running sampler; closing the last one stops it.

    The sampler holds its subscriptions, so a forgotten one keeps sampling until
    :meth:`close` (or interpreter exit): use it as a context manager where you can.

    ``samples()`` defaults to everything since this subscription began. After :meth:`close`
    the subscription keeps the samples it saw, frozen, so a caller can still read them.
    """

    def __init__(self, sampler: Sampler, period_s: float, on_tick: OnTick | None) -> None:
        self._sampler = sampler
        self.period_s = period_s
        self.on_tick = on_tick
        self.start_ns = sampler._clock_ns()
        self._final: Samples | None = None
        self.closed = False

    def samples(self, since_ns: int | None = None) -> Samples:
        """Samples with ``time_ns >= since_ns`` (default: since this subscription started)."""
        since = self.start_ns if since_ns is None else since_ns
        if self._final is not None:
            return _since(self._final, since)
        return self._sampler.samples(since)

    def latest(self) -> Samples:
        """One row per GPU: each metric's most recent value within the last minute of data.

        Looks back :data:`LATEST_LOOKBACK_NS` from the newest sample rather than over the
        whole ring, so it stays cheap an hour into a run; an older value is stale anyway.
        """
        if self._final is not None:
            frame = self._final.frame
            newest = int(frame["time_ns"].max()) if len(frame) else 0
            return latest_of(_since(self._final, newest - LATEST_LOOKBACK_NS))
        newest_ns = self._sampler.newest_ns()
        since = None if newest_ns is None else newest_ns - LATEST_LOOKBACK_NS
        return latest_of(self._sampler.samples(since))

    def close(self) -> None:
        """Release this subscription (idempotent); the last one stops the sampler thread."""
        if self.closed:
            return
        self.closed = True
        self._sampler._unsubscribe(self)
        self._final = self._sampler.samples(self.start_ns)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Sampler:
    """A reference-counted background sampler over an :class:`NvmlBackend`.

    ``nvml`` is the pynvml-like module to use (default: ``pynvml``); ``clock_ns`` stamps
    samples (wall clock, see docs/clocks.md); ``monotonic_ns`` times GPM windows at
    each GPM call. Both are injectable so tests are deterministic.
    """

    def __init__(
        self,
        nvml: Any = None,
        *,
        capacity: int = DEFAULT_CAPACITY,
        clock_ns: Callable[[], int] = time.time_ns,
        monotonic_ns: Callable[[], int] = time.monotonic_ns,
        join_timeout_s: float = 5.0,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1 sampling pass, got {capacity}")
        self._nvml = nvml
        self.capacity = capacity
        self._clock_ns = clock_ns
        self._monotonic_ns = monotonic_ns
        self._join_timeout_s = join_timeout_s
        self._lock = threading.Lock()
        self._blocks: deque[Block] = deque(maxlen=capacity)
        self._subs: list[Subscription] = []
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._backend: NvmlBackend | None = None
        self._gpus: dict[int, dict[str, Any]] = {}
        self._reasons: dict[tuple[int, str], str] = {}
        self._unavailable = ""
        self._state_version: tuple[int, int] = (0, -1)
        self._ticks = 0
        self._tick_cond = threading.Condition(self._lock)

    # -- subscribers --------------------------------------------------------------------

    def subscribe(
        self, period_s: float = DEFAULT_PERIOD_S, on_tick: OnTick | None = None
    ) -> Subscription:
        """Start sampling (if not already) at ``period_s`` or faster; returns at once.

        The sampler runs at the shortest period any subscriber asked for (at least
        :data:`MIN_PERIOD_S`). ``on_tick`` is called on the sampler thread after each pass;
        it must be quick and must not block.
        """
        if not period_s > 0:
            raise ValueError(f"period_s must be positive, got {period_s!r}")
        sub = Subscription(self, max(float(period_s), MIN_PERIOD_S), on_tick)
        with self._lock:
            self._subs.append(sub)
            start = self._thread is None
            if start:
                self._stop = threading.Event()
                self._thread = threading.Thread(
                    target=self._run, args=(self._stop,), name=THREAD_NAME, daemon=True
                )
        if start:
            assert self._thread is not None
            self._thread.start()
        return sub

    def _unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            if sub in self._subs:
                self._subs.remove(sub)
            if self._subs or self._thread is None:
                return
            thread, self._thread = self._thread, None
            self._stop.set()
        if thread is not threading.current_thread():
            thread.join(self._join_timeout_s)
            if thread.is_alive():
                logger.warning(
                    "the NVML sampler thread did not stop within %.0f s (stuck in the driver?)",
                    self._join_timeout_s,
                )

    @property
    def nvml(self) -> Any:
        """The pynvml-like module this sampler reads (None: ``pynvml``, imported on start)."""
        return self._nvml

    @property
    def running(self) -> bool:
        t = self._thread
        return t is not None and t.is_alive()

    @property
    def subscribers(self) -> int:
        with self._lock:
            return len(self._subs)

    def stop(self) -> None:
        """Close every subscription and stop the thread (e.g. at interpreter exit)."""
        with self._lock:
            subs = list(self._subs)
        for sub in subs:
            sub.close()

    # -- the thread ---------------------------------------------------------------------

    def _period(self) -> float:
        with self._lock:
            periods = [s.period_s for s in self._subs]
        return min(periods) if periods else DEFAULT_PERIOD_S

    def _run(self, stop: threading.Event) -> None:
        # The backend is this thread's own: a sampler restarted while an old thread is still
        # finishing its last pass must not share (or close) the new thread's NVML state.
        backend: NvmlBackend | None = None
        try:
            backend = self.open()
            if backend.unavailable and not backend.gpus:
                return  # nothing to sample; the reason is recorded and shown
            while not stop.is_set():
                started = time.monotonic()
                self._sample(backend)
                stop.wait(max(0.0, self._period() - (time.monotonic() - started)))
        except Exception as err:  # never let a bug kill the kernel or stop sampling silently
            logger.exception("the NVML sampler stopped on an unexpected error")
            with self._lock:
                self._unavailable = f"the sampler stopped on an unexpected error: {err!r}"
                self._state_version = (0, -1)
            # Said where the numbers are: the gauge shows it, a recording writes it down.
            self._notify(Tick(self._clock_ns(), Block.empty(), True))
        finally:
            if backend is not None:
                backend.close()
                if self._backend is backend:
                    self._backend = None

    def open(self) -> NvmlBackend:
        """Start NVML and find the GPUs (what the thread does first; tests call it directly)."""
        backend = NvmlBackend(self._nvml, self._monotonic_ns)
        self._backend = backend
        backend.open()
        self._sync_state(backend)
        if backend.unavailable:
            self._notify(Tick(self._clock_ns(), Block.empty(), True))
        return backend

    def close_backend(self) -> None:
        """Shut down what :meth:`open` started (tests that drive passes by hand)."""
        backend, self._backend = self._backend, None
        if backend is not None:
            backend.close()

    def _sync_state(self, backend: NvmlBackend) -> bool:
        version = (id(backend), backend.version)
        if version == self._state_version:
            return False
        gpus = _copy_gpus(backend.gpus)
        reasons = dict(backend.reasons)
        with self._lock:
            self._gpus, self._reasons = gpus, reasons
            self._unavailable = backend.unavailable
            self._state_version = version
        return True

    def sample_once(self) -> Tick | None:
        """One pass with the backend :meth:`open` started (tests drive passes by hand)."""
        backend = self._backend
        return None if backend is None else self._sample(backend)

    def _sample(self, backend: NvmlBackend) -> Tick:
        """One sampling pass over every GPU: append to the ring, notify subscribers."""
        wall = self._clock_ns()
        block = backend.read(wall)  # NVML calls: no lock held
        changed = self._sync_state(backend)
        with self._lock:
            if len(block):
                self._blocks.append(block)
            self._ticks += 1
            self._tick_cond.notify_all()
        tick = Tick(wall, block, changed)
        self._notify(tick)
        return tick

    def _notify(self, tick: Tick) -> None:
        with self._lock:
            callbacks = [s.on_tick for s in self._subs if s.on_tick is not None]
        for cb in callbacks:
            try:
                cb(tick)
            except Exception:
                logger.exception("a telemetry subscriber failed; it keeps receiving ticks")

    def wait_ticks(self, n: int, timeout_s: float) -> bool:
        """Block until ``n`` passes have run since the sampler was created (tests, benchmarks)."""
        with self._tick_cond:
            return self._tick_cond.wait_for(lambda: self._ticks >= n, timeout_s)

    @property
    def ticks(self) -> int:
        return self._ticks

    # -- reading ------------------------------------------------------------------------

    def state(self) -> tuple[dict[int, dict[str, Any]], dict[tuple[int, str], str], str]:
        """Copies of (gpus, reasons, unavailable) as of the last pass."""
        with self._lock:
            return self._copy_state()

    def _copy_state(self) -> tuple[dict[int, dict[str, Any]], dict[tuple[int, str], str], str]:
        # Callers hold the lock: the copies must agree with each other (and the ring).
        return _copy_gpus(self._gpus), dict(self._reasons), self._unavailable

    def newest_ns(self) -> int | None:
        """Time of the newest sample in the ring, or None when it is empty."""
        with self._lock:
            return int(self._blocks[-1].time_ns[-1]) if self._blocks else None

    def samples(self, since_ns: int | None = None) -> Samples:
        """A copy of the ring buffer (rows with ``time_ns >= since_ns``) as :class:`Samples`."""
        with self._lock:
            picked: list[Block] = []
            for block in reversed(self._blocks):
                if since_ns is not None and len(block) and block.time_ns[-1] < since_ns:
                    break
                picked.append(block)
            gpus, reasons, unavailable = self._copy_state()
        picked.reverse()
        return _to_samples(picked, gpus, reasons, unavailable, "live", since_ns)


def _copy_gpus(gpus: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """A copy deep enough that the sampler thread's later changes do not show through."""
    return {k: dict(v) for k, v in gpus.items()}


def _to_samples(
    blocks: list[Block],
    gpus: dict[int, dict[str, Any]],
    reasons: dict[tuple[int, str], str],
    unavailable: str,
    source: str,
    since_ns: int | None = None,
) -> Samples:
    import pandas as pd

    if not blocks:
        s = Samples.empty(unavailable=unavailable, source=source)
        s.gpus, s.reasons = gpus, reasons
        return s
    time_ns = np.concatenate([b.time_ns for b in blocks])
    gpu = np.concatenate([b.gpu for b in blocks])
    values = np.vstack([b.values for b in blocks])
    if since_ns is not None:
        keep = time_ns >= since_ns
        time_ns, gpu, values = time_ns[keep], gpu[keep], values[keep]
    if len(time_ns) > 1 and (np.diff(time_ns) < 0).any():
        # Driver-buffered utilization rows can predate the previous pass's own row.
        order = np.argsort(time_ns, kind="stable")
        time_ns, gpu, values = time_ns[order], gpu[order], values[order]
    data: dict[str, Any] = {"time_ns": time_ns, "gpu": gpu}
    for k, m in enumerate(METRIC_NAMES):
        data[m] = values[:, k]
    frame = pd.DataFrame(data, columns=list(SAMPLE_COLUMNS))
    return Samples(frame=frame, reasons=reasons, gpus=gpus, source=source, unavailable=unavailable)


def _since(samples: Samples, since_ns: int) -> Samples:
    frame = samples.frame[samples.frame["time_ns"] >= since_ns].reset_index(drop=True)
    return Samples(
        frame=frame,
        reasons=dict(samples.reasons),
        gpus=_copy_gpus(samples.gpus),
        source=samples.source,
        unavailable=samples.unavailable,
        cuda_devices={k: dict(v) for k, v in samples.cuda_devices.items()},
    )


def metric_series(samples: Samples, gpu: int, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """``(time_ns, values)`` of one metric of one GPU, rows where it is missing dropped.

    Use this (not the raw column) to draw or average one metric: rows of other kinds
    (a driver-buffered utilization sample carries only ``util_gpu``) sit between its rows
    as NaN, and a line drawn through NaN breaks at every one of them.
    """
    f = samples.frame
    rows = f["gpu"].to_numpy() == gpu
    t = f["time_ns"].to_numpy(dtype=np.int64)[rows]
    v = f[metric].to_numpy(dtype=np.float64)[rows]
    ok = ~np.isnan(v)
    return t[ok], v[ok]


def latest_of(samples: Samples) -> Samples:
    """One row per GPU: each metric's most recent non-missing value, at the newest time."""
    import pandas as pd

    frame = samples.frame
    if frame.empty:
        out = Samples.empty(unavailable=samples.unavailable, source=samples.source)
    else:
        ordered = frame.sort_values("time_ns", kind="stable")
        grouped = ordered.groupby("gpu", sort=True)
        last = grouped[list(METRIC_NAMES)].last()  # last() skips NaN per column
        last.insert(0, "time_ns", grouped["time_ns"].max())
        last = last.reset_index()[list(SAMPLE_COLUMNS)]
        out = Samples(frame=pd.DataFrame(last), source=samples.source)
        out.unavailable = samples.unavailable
    out.gpus = _copy_gpus(samples.gpus)
    out.reasons = dict(samples.reasons)
    out.cuda_devices = {k: dict(v) for k, v in samples.cuda_devices.items()}
    return out


# -- the process-wide sampler ----------------------------------------------------------

_default: Sampler | None = None
_default_lock = threading.Lock()


def get_sampler() -> Sampler:
    """The process-wide sampler shared by every gauge, recorder and ``%%gpuprof``."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Sampler()
        return _default


def configure(*, nvml: Any = None, capacity: int = DEFAULT_CAPACITY) -> Sampler:
    """Replace the process-wide sampler (another NVML module, another ring size).

    Only while it is stopped: a running sampler has subscribers relying on it.
    """
    global _default
    with _default_lock:
        if _default is not None and _default.subscribers:
            raise RuntimeError("the NVML sampler is running; close its subscriptions first")
        _default = Sampler(nvml, capacity=capacity)
        return _default


def subscribe(period_s: float = DEFAULT_PERIOD_S, on_tick: OnTick | None = None) -> Subscription:
    """Subscribe to the process-wide sampler; it starts with the first subscriber.

    Use as a context manager, or call ``.close()``; the last close stops the thread.
    """
    return get_sampler().subscribe(period_s, on_tick)


@atexit.register
def _stop_at_exit() -> None:
    s = _default
    if s is not None:
        s.stop()
