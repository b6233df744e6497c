"""Live GPU telemetry from NVML: one shared background sampler, recordings and replays.

Use::

    from nbprof import telemetry

    with telemetry.subscribe(period_s=0.25) as sub:   # starts the sampler thread
        train()
        samples = sub.samples()                        # a Samples (nbprof.telemetry.model)
    # the last subscription closed: the thread is gone

    with telemetry.record("run.jsonl"):               # JSON lines, see recording.py
        train()
    telemetry.replay("run.jsonl")                     # -> Samples, labelled as a replay

What is sampled, per GPU, at the period (default 250 ms): NVML ``utilization.gpu`` and
``utilization.memory`` (what nvidia-smi prints), memory used/total (``used`` as allocated,
from ``nvmlDeviceGetMemoryInfo_v2`` where the driver has it, with the driver's reservation
in ``mem_reserved``), power, SM clock and temperature; on Hopper and newer
(``nvmlGpmQueryDeviceSupport``) the GPM hardware counters: SM activity, SM occupancy,
any-Tensor-Core activity, HMMA/IMMA/DFMA tensor pipes, DRAM bandwidth and FP16/FP32 pipe
utilization, each computed over a window of at least 110 ms timed at the GPM calls
(nvml.h asks for more than 100 ms), so GPM runs at its own rate under a faster period.
Where the driver buffers its own utilization samples (``nvmlDeviceGetSamples``), those are
added as extra rows (only ``util_gpu`` set) at the driver's timestamps, which are finer than
the sampling period; the sampler's own row then leaves ``util_gpu`` empty so no stretch of
time is counted twice. Rows of different kinds therefore interleave with NaN in each other's
columns: draw or average one metric through :func:`metric_series`, which drops them.

Anything unavailable is a plain reason in ``Samples.reasons`` (per GPU and metric) or
``Samples.unavailable`` (no NVML library, no driver, no GPU, no permission), never an
exception in the user's code.

``gpu`` is NVML's index, which is not CUDA's (``CUDA_VISIBLE_DEVICES``, mixed GPUs): see
:mod:`nbprof.telemetry.devices` for the match a capture records in
``Samples.cuda_devices``.

Clocks: each sample is stamped with the system wall clock (``time.time_ns()``), the clock
Kineto stamps trace events with, so :func:`on_trace_clock` puts samples on a trace's time
axis; docs/clocks.md says how, and within what error (one averaging window, not 1 µs).

Ring buffer: the sampler keeps the last ``capacity`` passes (default 14 400: one hour at
4 Hz) in memory; older passes are dropped. Record to a file to keep more.
"""

from __future__ import annotations

from nbprof.telemetry.align import on_trace_clock
from nbprof.telemetry.model import METRICS, SAMPLE_COLUMNS, Samples
from nbprof.telemetry.recording import (
    Recorder,
    ReplaySource,
    read_recording,
    record,
    replay,
    write_jsonl,
)
from nbprof.telemetry.sampler import (
    DEFAULT_CAPACITY,
    DEFAULT_PERIOD_S,
    THREAD_NAME,
    Sampler,
    Subscription,
    Tick,
    configure,
    get_sampler,
    latest_of,
    metric_series,
    subscribe,
)

__all__ = [
    "DEFAULT_CAPACITY",
    "DEFAULT_PERIOD_S",
    "METRICS",
    "SAMPLE_COLUMNS",
    "THREAD_NAME",
    "Recorder",
    "ReplaySource",
    "Sampler",
    "Samples",
    "Subscription",
    "Tick",
    "configure",
    "get_sampler",
    "latest_of",
    "metric_series",
    "on_trace_clock",
    "read_recording",
    "record",
    "replay",
    "subscribe",
    "write_jsonl",
]
