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

Clocks: how samples line up with a profiler trace
-------------------------------------------------
Every sample is stamped with ``time.time_ns()`` on the sampler thread just before that
pass's NVML calls: the system wall clock, in nanoseconds since the Unix epoch. Kineto
stamps trace events from the same clock: a trace's events sit at
``Trace.origin_ns + ts * 1000`` (``ts`` in µs relative to ``origin_ns``, see
:mod:`nbprof.trace.model`). So, for a sample row ``r``::

    ts_us_on_trace = (r.time_ns - trace.origin_ns) / 1000   # on_trace_clock() does this

Error bound. A row stands for NVML's view at its stamp, within:

- the time the pass takes to reach that GPU after the stamp: nbprof's share is the "CPU per
  pass" in ``benchmarks/RESULTS.md`` (1.6-2.5 ms for 8 GPUs, on the fake backend and on
  the real pynvml over an emulated driver);
  the driver's own time per call comes on top and is not measured there;
- the averaging window of each number, which precedes the stamp: ``utilization.gpu`` and
  ``utilization.memory`` cover the driver's last sample period ("between 1 second and 1/6
  second, depending on the product", NVML's ``nvmlUtilization_t`` documentation); GPM
  metrics cover the window since the previous GPM sample (at least 110 ms; one sampling
  period at 4 Hz); driver-buffered utilization rows carry the driver's own timestamps
  (``nvmlSample_t.timeStamp``, "CPU timestamp in microseconds") and cover the driver's
  period before them;
- changes of the wall clock itself between a trace event and a sample: NTP slewing changes
  its rate by at most 500 ppm (``MAX_TICKADJ`` in Linux's kernel/time/ntp.c), i.e. 0.5 ms
  per second elapsed between the two; a clock *step* during a run shifts one against the
  other by the step.

So align a sample to the *window ending* at its time, and expect ±(one averaging window)
resolution, not ±1 µs: enough to see which phase of a step nvidia-smi calls busy while the
SMs idle, not to attribute a sample to a single kernel. Driver timestamps more than 60 s
away from ``time.time_ns()`` are taken as not wall-clock and ignored (util_gpu then comes
from ``nvmlDeviceGetUtilizationRates``).

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
