"""Multi-rank jobs: time and peak client memory as ranks grow, beside HolisticTraceAnalysis.

Jobs of 8, 64 and 256 ranks are made by replicating the 8 DLRM ranks of the trace corpus
(``param__dlrm_kineto_8ranks``) with new rank ids and world size, into a temporary folder.
Each is loaded, in its own subprocess, by

* ``nbprof.load(DIR, workers=1)``: every rank read and analysed in the client, one after
  another;
* ``nbprof.load(DIR, workers=2)``: in 2 local worker processes;
* ``nbprof.load(DIR, scheduler=client)``: on a 2-worker Dask ``LocalCluster`` (loopback),
  the cluster started before the clock starts;
* HolisticTraceAnalysis's ``TraceAnalysis(trace_dir=DIR)`` (it parses with a process pool).

Time is the wall clock of the load; memory is the client process's peak RSS (its workers'
memory is not the client's: that is the point of sending back only summaries).

    python benchmarks/bench_job.py [--sizes 8,64,256] [--no-hta] [--no-write]
    python benchmarks/bench_job.py --profile 64   # cProfile of one in-process load

``--profile N`` loads an N-rank job in-process under cProfile and prints where its time
went (cumulative, nbprof's own functions), instead of timing every mode.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "RESULTS.md"
MODES = ("in-process", "workers=2", "dask LocalCluster(2)", "HTA TraceAnalysis")
SECTION = "## Multi-rank jobs"


def corpus() -> Path:
    env = os.environ.get("NBPROF_TRACE_CORPUS")
    base = Path(env) if env else REPO.parent / "shared" / "traces"
    folder = base / "param__dlrm_kineto_8ranks"
    if not folder.is_dir():
        sys.exit(f"no DLRM rank folder at {folder} (set NBPROF_TRACE_CORPUS)")
    return folder


_RANK_IN_INFO = re.compile(
    rb'("distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*)\d+([^{}]*?"world_size"\s*:\s*)\d+'
)


def make_job(n: int, out: Path) -> Path:
    """``n`` ranks: the 8 DLRM ranks again and again, rank ids 0..n-1, world size n.

    Each copy is its original's text with only the rank and world size in its
    ``distributedInfo`` changed: laid out as Kineto wrote it (one event per indented
    block), as the files a job's ranks write are."""
    texts = [gzip.decompress(f.read_bytes()) for f in sorted(corpus().glob("*.gz"))]
    folder = out / f"job{n}"
    folder.mkdir(parents=True, exist_ok=True)
    for r in range(n):
        text = texts[r % len(texts)]
        ids = (str(r).encode(), str(n).encode())
        new, count = _RANK_IN_INFO.subn(
            lambda m, ids=ids: m.group(1) + ids[0] + m.group(2) + ids[1], text, 1
        )
        info = json.loads(new)["distributedInfo"]
        if count != 1 or (info["rank"], info["world_size"]) != (r, n):
            sys.exit(f"could not renumber rank {r}: its distributedInfo is laid out otherwise")
        (folder / f"rank{r:04d}.pt.trace.json.gz").write_bytes(gzip.compress(new, compresslevel=1))
    return folder


def _one(mode: str, folder: str) -> None:
    """Child: one load, then a JSON line with seconds and peak RSS."""
    import logging

    logging.disable(logging.WARNING)
    extra: dict[str, Any] = {}
    cluster = client = None
    if mode == "HTA TraceAnalysis":
        from hta.trace_analysis import TraceAnalysis
    else:
        # Imported before the clock, as HTA's is: the load's own modules too, since
        # nbprof imports them lazily.
        import nbprof
        import nbprof.analysis.job
        import nbprof.analysis.rank
        import nbprof.job
        import nbprof.parallel
    if mode.startswith("dask"):
        from distributed import Client, LocalCluster

        cluster = LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            silence_logs=40,
        )
        client = Client(cluster)
        client.wait_for_workers(2)
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    if mode == "HTA TraceAnalysis":
        ta = TraceAnalysis(trace_dir=folder)
        extra["ranks"] = len(ta.t.traces)
    else:
        # First reads, as HTA's are: no table cache to reopen the rank files from.
        kw: dict[str, Any] = {"cache": False}
        if mode == "workers=2":
            kw["workers"] = 2
        elif mode == "in-process":
            kw["workers"] = 1  # nbprof.load's own default uses every core where it can fork
        if client is not None:
            kw["scheduler"] = client
        job = nbprof.load(folder, **kw)
        extra["ranks"] = len(job.diagnosis.ranks)
        extra["stragglers"] = job.stragglers[:3]
    seconds = time.perf_counter() - t0
    # The client's own CPU time: on a shared machine it moves less with the others' load
    # than the wall clock (workers' CPU is theirs, not the client's).
    extra["client_cpu_s"] = time.process_time() - cpu0
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if client is not None:
        client.close()
        cluster.close()  # type: ignore[union-attr]
    print(json.dumps({"seconds": seconds, "rss_mb": rss_mb, **extra}))


def measure(mode: str, folder: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.run(
        [sys.executable, __file__, "--one", mode, str(folder)],
        capture_output=True, text=True, env=env, timeout=3600,
    )  # fmt: skip
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        return {"error": (p.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(lines[-1])


def profile(n: int, top: int = 40) -> None:
    """Where an in-process load of an ``n``-rank job spends its time (cProfile)."""
    import cProfile
    import logging
    import pstats

    import nbprof

    logging.disable(logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="nbprof-bench-job-") as tmp:
        folder = make_job(n, Path(tmp))
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.runcall(nbprof.load, folder, cache=False, workers=1)
        print(f"{n} ranks in-process under cProfile: {time.perf_counter() - t0:.1f} s")
    stats = pstats.Stats(prof)
    stats.sort_stats("cumulative").print_stats(r"nbprof/", top)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="8,64,256")
    ap.add_argument("--no-hta", action="store_true")
    ap.add_argument("--modes", help="comma-separated subset of: " + ", ".join(MODES))
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--profile", type=int, metavar="RANKS", help="cProfile one in-process load")
    ap.add_argument("--one", nargs=2, metavar=("MODE", "DIR"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        _one(*a.one)
        return
    if a.profile:
        profile(a.profile)
        return
    sizes = [int(s) for s in a.sizes.split(",")]
    modes = [m for m in MODES if not (a.no_hta and m.startswith("HTA"))]
    if a.modes:
        wanted = [m.strip() for m in a.modes.split(",")]
        if unknown := [m for m in wanted if m not in MODES]:
            sys.exit(f"unknown mode(s) {unknown}; choose from {list(MODES)}")
        modes = [m for m in modes if m in wanted]
    results: dict[int, dict[str, dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="nbprof-bench-job-") as tmp:
        for n in sizes:
            folder = make_job(n, Path(tmp))
            results[n] = {}
            for m in modes:
                r = measure(m, folder)
                results[n][m] = r
                print(f"{n:>4} ranks  {m:<22} {json.dumps(r)}", flush=True)
    report = render(results, modes)
    print(report)
    if not a.no_write:
        write(report)


def render(results: dict[int, dict[str, dict[str, Any]]], modes: list[str]) -> str:
    cpu = platform.processor() or platform.machine()
    lines = [
        SECTION,
        "",
        f"`python benchmarks/bench_job.py`, {dt.date.today()}, {os.cpu_count()} CPUs ({cpu}), "
        f"Python {platform.python_version()}; the 8 DLRM ranks of the corpus replicated with "
        "new rank ids; one run per cell, each in its own process; the machine is shared, so "
        "times carry its load.",
        "",
        "Seconds (client peak RSS, MiB):",
        "",
        "| ranks | " + " | ".join(modes) + " |",
        "|---:|" + "---:|" * len(modes),
    ]
    for n, row in results.items():
        cells = []
        for m in modes:
            r = row.get(m, {})
            cells.append(
                f"{r['seconds']:.2f} ({r['rss_mb']:.0f})" if "seconds" in r else r.get("error", "")
            )
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    lines += ["", "Per rank (seconds ÷ ranks):", ""]
    lines += ["| ranks | " + " | ".join(modes) + " |", "|---:|" + "---:|" * len(modes)]
    for n, row in results.items():
        lines.append(
            f"| {n} | "
            + " | ".join(
                f"{row[m]['seconds'] / n * 1e3:.0f} ms" if "seconds" in row.get(m, {}) else ""
                for m in modes
            )
            + " |"
        )
    lines += ["", *_targets(results), ""]
    return "\n".join(lines)


def _targets(results: dict[int, dict[str, dict[str, Any]]]) -> list[str]:
    out = ["Targets:", ""]
    best = ("in-process", "workers=2", "dask LocalCluster(2)")
    sizes = sorted(results)
    if len(sizes) >= 2:
        a, b = sizes[0], sizes[-1]
        for m in best:
            ra, rb = results[a].get(m, {}), results[b].get(m, {})
            if "seconds" in ra and "seconds" in rb:
                per_a, per_b = ra["seconds"] / a, rb["seconds"] / b
                out.append(
                    f"- linear in ranks, {m}: {per_a * 1e3:.0f} ms a rank at {a} ranks, "
                    f"{per_b * 1e3:.0f} ms at {b} ({per_b / per_a:.2f}x)"
                )
    top = results.get(256, {})
    for m in best:
        if "rss_mb" in top.get(m, {}):
            rss = top[m]["rss_mb"]
            met = "met" if rss <= 500 else "NOT met"
            out.append(f"- client peak RSS at 256 ranks <= 500 MiB, {m}: {rss:.0f} MiB ({met})")
    r64 = results.get(64, {})
    hta = r64.get("HTA TraceAnalysis", {})
    if "seconds" in hta:
        for m in best:
            if "seconds" in r64.get(m, {}):
                x = hta["seconds"] / r64[m]["seconds"]
                met = "met" if x >= 5 else "NOT met"
                out.append(f"- >= 5x faster than HTA at 64 ranks, {m}: {x:.1f}x ({met})")
    return out


def write(report: str) -> None:
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
    body = report.rstrip() + "\n\n"
    text = pattern.sub(body, text) if pattern.search(text) else text.rstrip() + "\n\n" + body
    RESULTS.write_text(text)


if __name__ == "__main__":
    main()
