"""Put samples on a profiler trace's time axis (the clocks: docs/clocks.md)."""

from __future__ import annotations

import pandas as pd

from nbprof.telemetry.model import Samples


def on_trace_clock(samples: Samples, origin_ns: int) -> pd.DataFrame:
    """``samples.frame`` with a ``ts`` column: µs relative to ``Trace.origin_ns``.

    A sample row at ``ts`` summarises the averaging window that *ends* at ``ts`` (see the
    error bound in docs/clocks.md). The subtraction is done in int64 nanoseconds
    before converting, so no precision is lost to float64 epoch times.
    """
    frame = samples.frame.copy()
    delta_ns = frame["time_ns"].to_numpy(dtype="int64") - int(origin_ns)
    frame.insert(1, "ts", delta_ns / 1000.0)
    return frame
