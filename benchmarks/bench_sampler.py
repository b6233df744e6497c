"""What the NVML sampler and the gauge cost: CPU per second of wall time, comm messages/s.

Runs the real sampler thread (1 and 8 GPUs, GPM on), with the main thread idle, at 4 Hz and
10 Hz; then the gauge on top at 4, 10 and 20 Hz, counting the messages its widget sends
through ipywidgets' comm. Two backends, side by side:

- ``fake``: the fake pynvml module of ``tests/fake_nvml.py`` (Python functions with
  pynvml's names): nbprof's own overhead (Python, numpy, the ring buffer, rendering);
- ``emulated``: the real pynvml (nvidia-ml-py) over the emulated C library of
  ``tests/emulated_nvml.py``: adds the wrapper's own work per call (function-pointer
  lookup, ctypes structures, argument conversion through libffi) and the emulated
  functions' (Python callbacks, so an upper bound of what a C driver costs on our side).

A real driver adds its own time inside each call (not measured here, no GPU on this machine).

    python benchmarks/bench_sampler.py [--seconds 8] [--results benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import random
import re
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

import emulated_nvml  # noqa: E402
import fake_nvml  # noqa: E402
import pynvml  # noqa: E402
from fake_nvml import FakeGpu  # noqa: E402

from nbprof.telemetry import Sampler, Tick  # noqa: E402
from nbprof.views.gauge import GaugeWidget, render_html, stylesheet  # noqa: E402


def _idle_cpu(seconds: float) -> float:
    """Process CPU per wall second with nothing running (the baseline to subtract)."""
    c0, w0 = time.process_time(), time.perf_counter()
    time.sleep(seconds)
    return (time.process_time() - c0) / (time.perf_counter() - w0)


BACKENDS = ("fake", "emulated")


@contextmanager
def backend(name: str, n_gpus: int) -> Iterator[tuple[Any, list[Any]]]:
    """(the nvml module to give the sampler, the GPUs whose readings a caller may vary)."""
    if name == "fake":
        fake = fake_nvml.build([FakeGpu() for _ in range(n_gpus)])
        yield fake, fake.state.gpus
        return
    driver = emulated_nvml.Driver([emulated_nvml.h100(i) for i in range(n_gpus)])
    with driver.installed(pynvml):
        yield pynvml, driver.gpus
    assert not driver.faults, driver.faults


def bench_sampler(name: str, n_gpus: int, hz: float, seconds: float) -> dict[str, Any]:
    with backend(name, n_gpus) as (nvml, _):
        return _bench_sampler(nvml, n_gpus, hz, seconds) | {"backend": name}


def _bench_sampler(nvml: Any, n_gpus: int, hz: float, seconds: float) -> dict[str, Any]:
    sampler = Sampler(nvml)
    thread_cpu: list[float] = []

    def on_tick(_: Tick) -> None:
        thread_cpu.append(time.thread_time())  # runs on the sampler thread

    c0, w0 = time.process_time(), time.perf_counter()
    with sampler.subscribe(1.0 / hz, on_tick) as sub:
        time.sleep(seconds)
    wall = time.perf_counter() - w0
    cpu = time.process_time() - c0
    rows = len(sub.samples())
    ticks = len(thread_cpu)
    # thread_time() at the last tick covers nvmlInit, every pass and its bookkeeping.
    per_pass_ms = thread_cpu[-1] / ticks * 1000 if ticks else float("nan")
    return {
        "gpus": n_gpus,
        "hz": hz,
        "ticks": ticks,
        "rate": ticks / wall,
        "rows": rows,
        "process_cpu_pct": cpu / wall * 100,
        "thread_cpu_pct": thread_cpu[-1] / wall * 100 if ticks else float("nan"),
        "per_pass_ms": per_pass_ms,
    }


def bench_gauge(name: str, n_gpus: int, hz: float, seconds: float) -> dict[str, Any]:
    with backend(name, n_gpus) as (nvml, gpus):
        return _bench_gauge(nvml, gpus, n_gpus, hz, seconds) | {"backend": name}


def _bench_gauge(
    nvml: Any, gpus: list[Any], n_gpus: int, hz: float, seconds: float
) -> dict[str, Any]:
    sampler = Sampler(nvml)
    g = GaugeWidget(period_s=1.0 / hz, sampler=sampler)
    sent: list[int] = []
    comm = g.widget.comm
    original = comm.send

    def send(data: Any = None, **kw: Any) -> None:
        sent.append(len(str(data)))
        original(data=data, **kw)

    comm.send = send
    thread_cpu: list[float] = []
    rng = random.Random(0)

    def vary(_: Tick) -> None:
        # Real readings move every pass; constant fake values would let the gauge skip
        # identical pictures and flatter the message rate.
        thread_cpu.append(time.thread_time())
        for gpu in gpus:
            gpu.util_gpu = rng.choice((0, 100, 100, 100))
            for k in gpu.gpm:
                gpu.gpm[k] = rng.uniform(0, 100)

    probe = sampler.subscribe(1.0 / hz, vary)
    c0, w0 = time.process_time(), time.perf_counter()
    g.start()
    time.sleep(seconds)
    g.stop()
    wall = time.perf_counter() - w0
    cpu = time.process_time() - c0
    probe.close()
    g.close()
    return {
        "gpus": n_gpus,
        "hz": hz,
        "ticks": len(thread_cpu),
        "messages": len(sent),
        "msgs_per_s": len(sent) / wall,
        "mean_msg_kb": (sum(sent) / len(sent) / 1024) if sent else 0.0,
        "process_cpu_pct": cpu / wall * 100,
        "thread_cpu_pct": thread_cpu[-1] / wall * 100 if thread_cpu else float("nan"),
    }


def full_window_message_kib(n_gpus: int, hz: float) -> float:
    """Size of one gauge picture with a full 60-s history (values varying every pass)."""
    clock = fake_nvml.FakeClock()
    fake = fake_nvml.build([FakeGpu() for _ in range(n_gpus)], clock=clock)
    sampler = Sampler(fake, clock_ns=clock.wall_ns, monotonic_ns=clock.monotonic_ns)
    sampler.open()
    rng = random.Random(0)
    for _ in range(int(60 * hz)):
        for gpu in fake.state.gpus:
            gpu.util_gpu = rng.choice((0, 100, 100, 100))
            for k in gpu.gpm:
                gpu.gpm[k] = rng.uniform(0, 100)
        sampler.sample_once()
        clock.advance(1.0 / hz)
    sampler.close_backend()
    # What an update sends: the stylesheet travels once, in its own widget.
    return len(render_html(sampler.samples(), with_style=False).encode()) / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=8.0, help="wall time per configuration")
    ap.add_argument("--results", type=Path, help="rewrite the '## NVML sampler' section here")
    args = ap.parse_args()
    s = args.seconds

    idle = _idle_cpu(min(s, 3.0)) * 100
    sampler_rows = [
        bench_sampler(b, n, hz, s) for n in (1, 8) for hz in (4.0, 10.0) for b in BACKENDS
    ]
    gauge_rows = [
        bench_gauge(b, n, hz, s) for n in (1, 8) for hz in (4.0, 10.0, 20.0) for b in BACKENDS
    ]
    full = {(n, hz): full_window_message_kib(n, hz) for n in (1, 8) for hz in (4.0, 10.0, 20.0)}

    lines = [
        "## NVML sampler",
        "",
        f"Measured {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC on "
        f"{platform.processor() or platform.machine()}, {_cpu_name()}, "
        f"{_cores()} cores, Python {platform.python_version()}, by "
        f"`python benchmarks/bench_sampler.py --seconds {s:g}` ({s:g} s of wall time per row).",
        "Backends (GPM on, every metric answered): `fake` is the fake pynvml module of "
        "`tests/fake_nvml.py`, so nbprof's own costs plus the fake's Python calls; `emulated` "
        "is the real nvidia-ml-py over the emulated C library of `tests/emulated_nvml.py` "
        "(C function pointers whose bodies are Python callbacks), so it adds the wrapper's "
        "ctypes work per call and the callbacks'. A real driver adds its own time inside each "
        "NVML call, not measured here (no GPU on this machine). The main thread "
        f"sleeps throughout; idle process CPU was {idle:.2f}% of one core. Load average "
        f"during the run: {_load()} (the machine is shared; CPU figures are this process's "
        "and this thread's own time, achieved rates can suffer from the others).",
        "",
        "Sampler alone (CPU as % of one core; per pass = sampler-thread CPU / passes):",
        "",
        "| backend | GPUs | target Hz | achieved Hz | process CPU % | sampler thread CPU % "
        "| CPU per pass (ms) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in sampler_rows:
        lines.append(
            f"| {r['backend']} | {r['gpus']} | {r['hz']:g} | {r['rate']:.2f} | "
            f"{r['process_cpu_pct']:.2f} | "
            f"{r['thread_cpu_pct']:.2f} | {r['per_pass_ms']:.2f} |"
        )
    lines += [
        "",
        "Sampler + gauge (widget value changes sent through the comm; the gauge renders on "
        "the sampler thread, coalesces to at most one update per 0.1 s and skips unchanged "
        "pictures; readings change randomly every pass, the worst case; the process CPU "
        f"includes that randomising; the stylesheet, {len(stylesheet().encode()) / 1024:.1f} "
        "KiB, is sent once, not per message). Until its 60 s window is full the history "
        "spans the whole chart, so a row's mean message (its first seconds) holds more "
        "points than a fixed 60 s scale would draw; the full-window column is the bound:",
        "",
        "| backend | GPUs | sampling Hz | comm messages/s | mean message (KiB) | message with "
        "a full 60 s history (KiB) | process CPU % | sampler thread CPU % |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in gauge_rows:
        lines.append(
            f"| {r['backend']} | {r['gpus']} | {r['hz']:g} | {r['msgs_per_s']:.2f} | "
            f"{r['mean_msg_kb']:.1f} | "
            f"{full[(r['gpus'], r['hz'])]:.1f} | "
            f"{r['process_cpu_pct']:.2f} | {r['thread_cpu_pct']:.2f} |"
        )
    section = "\n".join(lines) + "\n"
    print(section)
    if args.results:
        _write_section(args.results, section)
    leftover = [t.name for t in threading.enumerate() if t.name.startswith("nbprof")]
    assert not leftover, leftover


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def _load() -> str:
    import os

    try:
        return " / ".join(f"{x:.1f}" for x in os.getloadavg()) + " (1/5/15 min)"
    except OSError:
        return "unknown"


def _cores() -> int:
    import os

    return os.cpu_count() or 0


def _write_section(path: Path, section: str) -> None:
    """Replace only the '## NVML sampler' section (up to the next '## '), or append it."""
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    pattern = re.compile(r"^## NVML sampler\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text.rstrip("\n") + "\n")


if __name__ == "__main__":
    main()
