"""Trace load + analysis speed and memory, side by side with orjson, HolisticTraceAnalysis and
traceinsight.

On ``hta__df_index_resolver`` (216k events, 51 MiB of JSON) from the trace corpus, and on
bigger traces made by replicating its events with shifted times (and shifted correlation,
flow and external ids, so every link stays unique), written to ``benchmarks/out/``:

* ``nbprof.load`` (the trace reader) then ``nbprof.analysis.analyze`` on the result;
* gunzip + ``orjson.loads`` of the same file (a generic parse, nothing built on top);
* HolisticTraceAnalysis's ``TraceAnalysis`` load of a folder holding the same file;
* the same with ``traceinsight`` 0.6.1, HolisticTraceAnalysis's successor. It installs a
  package named ``hta`` too, so it cannot share an environment with HolisticTraceAnalysis:
  it is read from its own folder, ``$NBPROF_BENCH_TRACEINSIGHT`` or
  ``benchmarks/out/traceinsight``, made with
  ``pip install --no-deps --target benchmarks/out/traceinsight traceinsight==0.6.1``
  (its dependencies are HolisticTraceAnalysis's, already installed);
* ``nbprof.load`` through its table cache: the first load (which writes the cache) and the
  second (which reads it), in a cache folder of their own;
* with ``--old TREE``, ``nbprof.load`` + ``analyze`` of another checkout (its own C
  extensions built in place), to compare two versions in the same run;
* ``pure``: this tree's ``nbprof.load`` + ``analyze`` without its C accelerator
  (``NBPROF_ACCEL=0``).

nbprof's time is split by stage (gunzip, decode, tables, analysis), and each contender's
speed is also given in MB/s of JSON, load + analysis.

Each measurement runs in its own subprocess; peak memory is that process's peak RSS
(shown whole, and above the process's size after its imports). The contenders take turns,
one run each per round, for ``--repeat`` rounds (``--big-repeat`` on the largest size, where
HolisticTraceAnalysis takes about a minute a run); each keeps its best run, and the report
gives the median and range of all runs beside it. The section "Trace load and analysis" of
``benchmarks/RESULTS.md`` is rewritten with what this run measured.

    python benchmarks/bench_load.py [--sizes 1,2,5,10] [--repeat 5] [--big-repeat 2]
                                    [--no-hta] [--no-write] [--only MODES] [--old TREE]
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
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "benchmarks" / "out"
RESULTS = REPO / "benchmarks" / "RESULTS.md"
SECTION = "## Trace load and analysis"
TRACE_NAME = "hta__df_index_resolver__df_index_resolver.json.gz"
MB = 1024 * 1024
TRACEINSIGHT = Path(os.environ.get("NBPROF_BENCH_TRACEINSIGHT", OUT / "traceinsight"))
#: The cache folder of the cached-load runs (emptied before each first load).
CACHE = OUT / "cache"
#: Every contender, in the order they take turns.
MODES = ("nbprof", "old", "cold", "warm", "orjson", "hta", "traceinsight")
#: Contenders run beside them, quoted in the targets only: this tree without its accelerator.
EXTRA = ("pure",)
#: The checkout the "old" contender runs (``--old``), and how it is named in the report.
OLD_TREE: Path | None = None
OLD_NAME = "old tree"


def corpus_dir() -> Path | None:
    env = os.environ.get("NBPROF_TRACE_CORPUS")
    for c in [Path(env)] if env else [REPO.parent / "shared" / "traces"]:
        if (c / TRACE_NAME).is_file():
            return c
    return None


# -- the replicated traces ---------------------------------------------------------------------


def _shift(events: list[dict[str, Any]], dt_us: int, did: int) -> None:
    """Move events by ``dt_us`` in time and ``did`` in every id that links events."""
    for e in events:
        if "ts" in e and e.get("ph") != "M":
            e["ts"] += dt_us
        if "id" in e and isinstance(e["id"], int):
            e["id"] += did
        args = e.get("args")
        if isinstance(args, dict):
            for k in ("correlation", "External id", "external id"):
                if isinstance(args.get(k), int):
                    args[k] += did


def _kineto_layout(events: list[dict[str, Any]]) -> bytes:
    """The events as Kineto lays them out: each a block at two spaces, its fields indented
    below it, ``},\n  {`` between two (the reader cuts big files at that text; a replica
    on one line would be read by the slower path that other writers' files take)."""
    import orjson

    return b",".join(b"\n  {\n    " + orjson.dumps(e)[1:-1] + b"\n  }" for e in events)


def replicate(src: Path, copies: int) -> tuple[Path, int, int]:
    """``src`` with its events repeated ``copies`` times back to back: (path, events, bytes).

    Written piece by piece (one copy in memory at a time); reused when already there.
    """
    import orjson

    OUT.mkdir(parents=True, exist_ok=True)
    # "_k": laid out as Kineto writes (earlier replicas were one line, and are not reused).
    dst = OUT / f"{src.name.split('.')[0]}_x{copies}_k.json.gz"
    meta = dst.with_suffix(".meta")
    if dst.is_file() and meta.is_file():
        m = json.loads(meta.read_text())
        return dst, m["events"], m["json_bytes"]
    doc = orjson.loads(gzip.decompress(src.read_bytes()))
    events = doc.pop("traceEvents")
    timed = [e for e in events if "ts" in e and e.get("ph") != "M"]
    start = min(e["ts"] for e in timed)
    end = max(e["ts"] + e.get("dur", 0) for e in timed)
    span = int(end - start) + 1000
    ids = [e["id"] for e in events if isinstance(e.get("id"), int)]
    for e in events:
        a = e.get("args")
        if isinstance(a, dict):
            ids += [a[k] for k in ("correlation", "External id") if isinstance(a.get(k), int)]
    id_step = max(ids) + 1
    head = orjson.dumps(doc)[:-1]  # the top-level object without its closing brace
    written = 0
    n = 0
    with gzip.open(dst.with_suffix(".tmp"), "wb", compresslevel=1) as f:

        def put(b: bytes) -> None:
            nonlocal written
            f.write(b)
            written += len(b)

        put(head + (b',"traceEvents":[' if len(head) > 1 else b'"traceEvents":['))
        for k in range(copies):
            if k:
                _shift(events, span, id_step)
                put(b",")
            put(_kineto_layout(events))
            n += len(events)
        put(b"\n]}")
    dst.with_suffix(".tmp").rename(dst)
    meta.write_text(json.dumps({"events": n, "json_bytes": written}))
    return dst, n, written


#: The issue sets the cache target (second load <= 10% of the first) on the 2.16M-event trace;
#: smaller traces' re-opens are shown against it, not judged by it.
CACHE_TARGET_EVENTS = 2_000_000


def _cache_verdict(share: float, events: int) -> str:
    if events >= CACHE_TARGET_EVENTS:
        return f"{_verdict(share <= 0.10)}: 10%"
    return "the 10% target is set at 2.16M events"


# -- one measurement per subprocess ------------------------------------------------------------


def _rss_mb() -> float:
    """Peak RSS of this process so far (and of any children it waited for), in MB.

    ``VmHWM`` first: ``ru_maxrss`` survives ``exec``, so a child would report the parent's
    size at fork time when that is larger.
    """
    kids_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    try:
        status = Path("/proc/self/status").read_text()
        self_kb = int(re.search(r"VmHWM:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    except (OSError, AttributeError):
        self_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return max(self_kb, kids_kb) / 1024  # Linux reports kB


class _Stages:
    """Seconds spent in the reader's stages, by wrapping the functions that do them (this
    tree's, or an older tree's where the ``old`` contender runs one)."""

    def __init__(self) -> None:
        import nbprof.trace.decode as dec
        import nbprof.trace.reader as reader

        self.s = {"gunzip": 0.0, "decode": 0.0}
        #: When each stage was first entered (perf_counter).
        self.first: dict[str, float] = {}
        try:
            import nbprof.trace.tables as tb
        except ImportError:
            tb = None  # type: ignore[assignment]
        if tb is not None and hasattr(tb, "finish"):
            # The tables' last step: it begins once every event is read.
            tb.finish = self._timed("finish", tb.finish)  # type: ignore[assignment]
        elif hasattr(reader, "_finish_rank"):
            reader._finish_rank = self._timed("finish", reader._finish_rank)
        import nbprof.trace.io as io

        # Decompressed a piece at a time, whether the file is then streamed or read whole:
        # each piece's inflating is timed.
        io.gunzip_pieces = self._timed_pieces("gunzip", io.gunzip_pieces)  # type: ignore[assignment]
        # Reading the events: the accelerator, else the pure path (this tree); the C
        # scanner, else msgspec's decoding (older trees).
        for name in ("decode_file", "decode_chunk", "decode_piece"):
            if hasattr(dec, name):
                setattr(dec, name, self._timed("decode", getattr(dec, name)))
        if hasattr(dec, "events"):  # a generator: the time to each run of columns
            dec.events = self._timed_pieces("decode", dec.events)  # type: ignore[assignment]
        for module, name in (("nbprof.trace.accel", "events"), ("nbprof.trace.scan", "scan_piece")):
            try:
                m = __import__(module, fromlist=[name])
            except ImportError:
                continue
            if hasattr(m, name):
                setattr(m, name, self._timed("decode", getattr(m, name)))

    def _timed_pieces(self, stage: str, f: Any) -> Any:
        def run(*a: Any, **k: Any) -> Any:
            pieces = f(*a, **k)
            while True:
                t = time.perf_counter()
                try:
                    piece = next(pieces)
                except StopIteration:
                    return
                finally:
                    self.s[stage] += time.perf_counter() - t
                yield piece

        return run

    def _timed(self, stage: str, f: Any) -> Any:
        def run(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            self.first.setdefault(stage, t)
            try:
                return f(*a, **k)
            finally:
                self.s[stage] = self.s.get(stage, 0.0) + time.perf_counter() - t

        return run


def _hta_load(path: str, out: dict[str, Any]) -> None:
    import logging

    import hta
    from hta.trace_analysis import TraceAnalysis

    out["module"] = str(Path(hta.__file__).parent)
    logging.disable(logging.INFO)
    folder = OUT / f"hta_{Path(path).name.split('.')[0]}"
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / "rank0.json.gz"
    if not link.exists():
        link.symlink_to(Path(path).resolve())
    out["base_mb"] = _rss_mb()
    t0 = time.perf_counter()
    TraceAnalysis(trace_dir=str(folder))
    out["load_s"] = time.perf_counter() - t0


def child(mode: str, path: str) -> dict[str, Any]:
    out: dict[str, Any] = {"mode": mode}
    if mode in ("nbprof", "old", "pure", "cold", "warm"):
        import inspect

        import pandas  # noqa: F401 (a dependency: counted in the size after imports)

        from nbprof.loading import load

        try:
            from nbprof.analysis import analyze
        except ImportError:
            analyze = None  # type: ignore[assignment]
        kw: dict[str, Any] = {"progress": False}
        if "cache" in inspect.signature(load).parameters:
            kw["cache"] = mode in ("cold", "warm")
        elif mode in ("cold", "warm"):
            raise SystemExit("this nbprof has no table cache")
        stages = _Stages()
        out["base_mb"] = _rss_mb()
        t0 = time.perf_counter()
        prof = load(path, **kw)
        t1 = time.perf_counter()
        out["load_s"] = t1 - t0
        out["load_mb"] = _rss_mb()
        out.update(stages.s)
        out["tables"] = out["load_s"] - stages.s["gunzip"] - stages.s["decode"]
        if "finish" in stages.first:
            # Reading the events (in one process or shared out) against what follows it.
            out["read_s"] = stages.first["finish"] - t0
        if analyze is not None:
            analyze(prof.trace, None)
            out["analyze_s"] = time.perf_counter() - t1
        out["events"] = prof.trace.event_count
    elif mode == "orjson":
        import orjson

        out["base_mb"] = _rss_mb()
        t0 = time.perf_counter()
        orjson.loads(gzip.decompress(Path(path).read_bytes()))
        out["load_s"] = time.perf_counter() - t0
    elif mode == "hta":
        _hta_load(path, out)
    elif mode == "traceinsight":
        if not (TRACEINSIGHT / "hta").is_dir():
            raise SystemExit(
                f"traceinsight is not in {TRACEINSIGHT}: pip install --no-deps --target "
                f"{TRACEINSIGHT} traceinsight==0.6.1"
            )
        sys.path.insert(0, str(TRACEINSIGHT))
        _hta_load(path, out)
        if not out["module"].startswith(str(TRACEINSIGHT)):
            raise SystemExit(f"imported hta from {out['module']}, not traceinsight")
    out["peak_mb"] = _rss_mb()
    return out


def measure(mode: str, path: Path, timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", mode, str(path)]
    # One process decodes each file (older trees could share one file's decoding out).
    env = dict(os.environ, NBPROF_CACHE_DIR=str(CACHE), NBPROF_PARSE_WORKERS="1")
    if mode == "old":
        if OLD_TREE is None:
            return {"mode": mode, "error": "no --old tree given"}
        # This script, importing the other tree's nbprof.
        env["PYTHONPATH"] = str(OLD_TREE)
    if mode == "pure":
        # This tree without its C accelerator: the factor its missing-accelerator warning
        # quotes (nbprof.trace.accel.PURE_SLOWDOWN).
        env["NBPROF_ACCEL"] = "0"
    if mode == "cold":
        import shutil

        shutil.rmtree(CACHE, ignore_errors=True)
    try:
        p = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, check=False, env=env
        )
    except subprocess.TimeoutExpired:
        return {"mode": mode, "error": f"over {timeout:.0f} s"}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        tail = (p.stderr.strip().splitlines() or p.stdout.strip().splitlines() or ["no output"])[-1]
        return {"mode": mode, "error": f"exit {p.returncode}: {tail[:200]}"}
    return json.loads(lines[-1])


def total_s(r: dict[str, Any]) -> float:
    """The timed part of one run: load (+ analysis for nbprof)."""
    return float(r["load_s"] + r.get("analyze_s", 0.0))


def interleaved(
    modes: list[str], path: Path, repeat: int, timeout: float
) -> dict[str, dict[str, Any]]:
    """``repeat`` rounds of every contender, one after the other in each round.

    Round-robin rather than all runs of one contender then all of the next, so that a busy
    spell on a shared machine lands on every contender alike. Per contender: its best run
    (the one with the least time), with every run's time kept in ``times`` for the spread.
    """
    got: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    for k in range(repeat):
        for m in modes:
            print(f"  {m} run {k + 1}/{repeat} ...", flush=True)
            got[m].append(measure(m, path, timeout))
    out: dict[str, dict[str, Any]] = {}
    for m, runs in got.items():
        ok = [r for r in runs if "error" not in r]
        if not ok:
            out[m] = runs[-1]
            continue
        b = dict(min(ok, key=total_s))
        b["times"] = sorted(total_s(r) for r in ok)
        out[m] = b
    return out


def gunzip_backends(files: list[Path], repeat: int = 3) -> list[str]:
    """Markdown rows: the reader's own gunzip (nbprof.trace.io._gunzip, piece by piece, as
    a load runs it) through zlib, ISA-L (``isal``) and zlib-ng, best of ``repeat``, in this
    process, one file after the other, the backends taking turns."""
    import importlib
    import zlib

    import nbprof.trace.io as tio

    backends: dict[str, Any] = {"zlib": zlib}
    for name, mod in (("isal", "isal.isal_zlib"), ("zlib-ng", "zlib_ng.zlib_ng")):
        try:
            backends[name] = importlib.import_module(mod)
        except ImportError:
            pass
    saved = tio._inflate, tio._INFLATE_ERRORS
    rows = []
    try:
        for f in files:
            raw = f.read_bytes()
            best: dict[str, float] = {}
            size = 0
            for _ in range(repeat):
                for name, mod in backends.items():
                    tio._inflate, tio._INFLATE_ERRORS = mod, (zlib.error, mod.error)
                    t = time.perf_counter()
                    size = len(tio._gunzip(raw, str(f)))
                    best[name] = min(best.get(name, 1e9), time.perf_counter() - t)
            cells = " | ".join(
                f"{best[n] * 1e3:.0f} ms, {size / 1e6 / best[n]:.0f} MB/s"
                if n in best
                else "absent"
                for n in ("zlib", "isal", "zlib-ng")
            )
            rows.append(f"| {f.name.split('.')[0][:48]} | {size / 1e6:.1f} | {cells} |")
    finally:
        tio._inflate, tio._INFLATE_ERRORS = saved
    return rows


def render_gunzip(rows: list[str]) -> list[str]:
    return [
        "",
        "Gunzip backends: the reader's own piecewise gunzip (`nbprof.trace.io._gunzip`) of each",
        "gzip trace of the corpus above 5 MB of JSON and of the largest benchmark trace, through",
        "zlib, ISA-L (`isal`, used when installed: `nbprof[fast]`) and zlib-ng; best of 3, the",
        "backends taking turns:",
        "",
        "| trace | JSON MB | zlib | isal | zlib-ng |",
        "|---|---:|---|---|---|",
        *rows,
    ]


def median(xs: list[float]) -> float:
    ys = sorted(xs)
    n = len(ys)
    return ys[n // 2] if n % 2 else (ys[n // 2 - 1] + ys[n // 2]) / 2


# -- report ------------------------------------------------------------------------------------


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))  # type: ignore[union-attr]
        mem = f", {kb / MB:.0f} GiB RAM"
    except (OSError, AttributeError):
        pass
    import msgspec
    import numpy
    import orjson
    import pandas

    try:
        from importlib.metadata import version

        hta_v = version("HolisticTraceAnalysis")
    except Exception:
        hta_v = "absent"
    ti = sorted(TRACEINSIGHT.glob("traceinsight-*.dist-info"))
    ti_v = ti[-1].name.removeprefix("traceinsight-").removesuffix(".dist-info") if ti else "absent"
    return (
        f"{cpu}, {os.cpu_count()} cores{mem}; {platform.system()} {platform.release()}; "
        f"Python {platform.python_version()}, numpy {numpy.__version__}, pandas "
        f"{pandas.__version__}, msgspec {msgspec.__version__}, orjson {orjson.__version__}, "
        f"HolisticTraceAnalysis {hta_v}, traceinsight {ti_v}"
    )


def fmt(v: float | None, nd: int = 2) -> str:
    return "n/a" if v is None else f"{v:.{nd}f}"


def spread(m: dict[str, Any]) -> str:
    """``best (median; min-max, n runs)`` of a contender's runs, or why there is none."""
    if "error" in m or "times" not in m:
        return str(m.get("error", "not run"))
    t = m["times"]
    if len(t) == 1:
        return f"{t[0]:.2f} (1 run)"
    return f"**{t[0]:.2f}** ({median(t):.2f}; {t[0]:.2f}-{t[-1]:.2f}, {len(t)} runs)"


def _best(m: dict[str, Any]) -> float | None:
    return m["times"][0] if "times" in m else None


def _mbps(m: dict[str, Any], json_bytes: int) -> str:
    b = _best(m)
    return "n/a" if not b else f"{json_bytes / 1e6 / b:.0f}"


def _verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def render(rows: list[dict[str, Any]], growth: list[dict[str, Any]], analysis: bool,
           load_avg: str, repeat: int, big_repeat: int,
           gunzip: list[str] | None = None) -> str:  # fmt: skip
    today = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    end_avg = " ".join(f"{x:.1f}" for x in os.getloadavg())
    # The benchmark's own run keeps one core busy: a 1-minute load much above 1 is others'.
    peak = max(float(load_avg.split()[0]), os.getloadavg()[0])
    busy = (
        "The machine's 2 cores are shared with other builds and tests, which ran along: "
        "single timings are noisy, and a second process competes for a core that is "
        "rarely idle."
        if peak > 1.5
        else "The 1-minute load stayed near the one core this benchmark keeps busy: little "
        "else ran beside it."
    )
    lines = [
        SECTION,
        "",
        f"Measured by `python benchmarks/bench_load.py` on {today}.",
        "",
        f"Machine: {machine()}.",
        "",
        f"Load average (1/5/15 min) at the start: {load_avg}; at the end: {end_avg}. {busy}",
        "Every run is a fresh subprocess; the contenders take turns",
        f"(one run of each per round, so a busy spell hits all of them), {repeat} rounds per",
        f"size, {big_repeat} on the largest. Each cell shows the **best** run, then the median",
        "and the range of all runs. The same file and bytes for every contender, each through",
        "its normal public API: `nbprof.load(..., cache=False)` + `nbprof.analysis.analyze`",
        f"in one process, of this tree and of {OLD_NAME} (the same, run from that checkout);",
        "the same through the table cache, first load (cache written) and second (cache",
        "read), both + analyze; gzip.decompress + `orjson.loads`; HolisticTraceAnalysis's and",
        "traceinsight's `TraceAnalysis(trace_dir=...)` on a folder holding that file.",
        "",
    ]
    if not analysis:
        lines += ["`nbprof.analysis.analyze` was not importable: nbprof times are load only.", ""]
    lines += [
        "Seconds (nbprof: load + analyze):",
        "",
        f"| trace | events | JSON MiB | nbprof | nbprof, {OLD_NAME} | "
        "nbprof, 1st load (writes cache) | "
        "nbprof, 2nd load (cache) | gunzip + orjson.loads | HTA 0.5.0 | traceinsight 0.6.1 |",
        "|---|---:|---:|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        g = r["got"]
        cells = " | ".join(spread(g.get(m, {"error": "not run"})) for m in MODES)
        lines.append(f"| {r['name']} | {r['events']:,} | {r['json_bytes'] / MB:.0f} | {cells} |")
    lines += [
        "",
        "Throughput, MB/s of JSON (10^6 bytes) per second of the best run:",
        "",
        f"| trace | nbprof | {OLD_NAME} | 1st load | 2nd load | orjson | HTA | traceinsight |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        g = r["got"]
        cells = " | ".join(_mbps(g.get(m, {}), r["json_bytes"]) for m in MODES)
        lines.append(f"| {r['name']} | {cells} |")
    lines += [
        "",
        "Where nbprof's time goes (seconds, the best uncached run, and the second load from",
        "the cache): gunzip = decompressing the file; decode = reading its events into",
        "columns (the C accelerator, else the pure path; in older trees the C scanner, else",
        "msgspec's decoding); tables = everything else in the load (tabulating, links,",
        "frames; from the cache: reading it); analysis = `nbprof.analysis.analyze`. Read =",
        "the seconds until every event was read, last step = the tables' last step after it",
        "(joining, linking, sorting).",
        "",
        "| trace | run | gunzip | decode | tables | analysis | total | read | last step |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        for m, label in (
            ("nbprof", "1 process"),
            ("old", OLD_NAME),
            ("warm", "2nd load (cache)"),
        ):
            x = r["got"].get(m, {})
            if "times" not in x:
                continue
            lines.append(
                f"| {r['name']} | {label} | {x['gunzip']:.2f} | {x['decode']:.2f} | "
                f"{x['tables']:.2f} | {fmt(x.get('analyze_s'))} | {total_s(x):.2f} | "
                f"{fmt(x.get('read_s'))} | {fmt(x.get('finish'))} |"
            )

    def mem(m: dict[str, Any]) -> str:
        if "error" in m or "peak_mb" not in m:
            return str(m.get("error", "not run"))
        return f"{m['peak_mb']:.0f} (+{m['peak_mb'] - m['base_mb']:.0f})"

    lines += [
        "",
        "Peak memory of the best run, MiB: the process's peak RSS (`VmHWM`), or its largest",
        "child's where that is larger; in brackets, its growth above the size of the process",
        "after its imports.",
        "",
        f"| trace | nbprof | {OLD_NAME} | 1st load | 2nd load | orjson | HTA | traceinsight |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        cells = " | ".join(mem(r["got"].get(m, {})) for m in MODES)
        lines.append(f"| {r['name']} | {cells} |")
    lines += ["", "Targets, from the numbers above (best runs; medians in brackets):", ""]
    for r in rows:
        g = r["got"]
        nb = g.get("nbprof", {})
        if "times" not in nb:
            continue
        best_nb, med_nb = nb["times"][0], median(nb["times"])
        parts = [f"- {r['name']}:"]
        for m, who in (("hta", "HTA"), ("traceinsight", "traceinsight")):
            if "times" in g.get(m, {}):
                x = g[m]["times"][0] / best_nb
                xm = median(g[m]["times"]) / med_nb
                parts.append(f"{x:.1f}x faster than {who} ({xm:.1f}x) ({_verdict(x >= 10)}: 10x);")
        rate = r["json_bytes"] / 1e6 / best_nb
        parts.append(f"{rate:.0f} MB/s end to end on one core ({_verdict(rate >= 200)}: 200 MB/s);")
        old = g.get("old", {})
        if "times" in old:
            x = best_nb / old["times"][0]
            xm = med_nb / median(old["times"])
            mem_x = nb["peak_mb"] / old["peak_mb"]
            parts.append(
                f"against {OLD_NAME}: {x:.2f}x its time ({xm:.2f}x of the medians) "
                f"({_verdict(x <= 1.10)}: at most 1.10x), peak memory {nb['peak_mb']:.0f} MiB "
                f"against {old['peak_mb']:.0f} ({mem_x:.2f}x) ({_verdict(mem_x <= 1.0)}: "
                "no higher);"
            )
        pure = g.get("pure", {})
        if "times" in pure:
            parts.append(
                f"the pure path (`NBPROF_ACCEL=0`): {pure['times'][0] / best_nb:.2f}x the "
                f"time with the accelerator ({median(pure['times']) / med_nb:.2f}x of the "
                "medians);"
            )
        ratio = nb["peak_mb"] * MB / r["json_bytes"]
        grow = (nb["peak_mb"] - nb["base_mb"]) * MB / r["json_bytes"]
        parts.append(
            f"peak memory {ratio:.2f}x the JSON size ({grow:.2f}x above the imports) "
            f"({_verdict(ratio <= 2)}: 2x)"
        )
        cold, warm = g.get("cold", {}), g.get("warm", {})
        if "times" in cold and "times" in warm:
            share = warm["load_s"] / nb["load_s"]
            parts[-1] += ";"
            parts.append(
                f"the second load from the cache takes {warm['load_s']:.2f} s, "
                f"{share * 100:.0f}% of the uncached load's {nb['load_s']:.2f} s and "
                f"{warm['load_s'] / cold['load_s'] * 100:.0f}% of the first load's "
                f"{cold['load_s']:.2f} s "
                f"(which wrote the cache) ({_cache_verdict(share, nb.get('events', 0))}); "
                "with analysis "
                f"{total_s(warm):.2f} s vs {best_nb:.2f} s."
            )
        else:
            parts[-1] += "."
        lines.append(" ".join(parts))
    if growth:
        lines += [
            "",
            "Growth with size (`nbprof.load` alone, and with analysis; best run, then the range):",
            "",
            "| events | JSON MiB | load s | load µs/event | load + analyze s | µs/event | MB/s "
            "| range s |",
            "|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for g in growth:
            tot = g["load_s"] + g.get("analyze_s", 0)
            t = g.get("times", [tot])
            lines.append(
                f"| {g['events']:,} | {g['json_bytes'] / MB:.0f} | {g['load_s']:.2f} | "
                f"{g['load_s'] / g['events'] * 1e6:.2f} | {tot:.2f} | "
                f"{tot / g['events'] * 1e6:.2f} | {g['json_bytes'] / 1e6 / tot:.0f} | "
                f"{t[0]:.2f}-{t[-1]:.2f} ({len(t)} runs) |"
            )
    if gunzip:
        lines += render_gunzip(gunzip)
    return "\n".join(lines) + "\n"


def gz_files(corpus: Path, biggest: Path | None) -> list[Path]:
    import gzip as gz

    files = []
    for f in sorted(corpus.rglob("*.gz")):
        with gz.open(f) as g:
            if len(g.read()) > 5_000_000:
                files.append(f)
    return files + ([biggest] if biggest is not None else [])


def write_section(text: str) -> None:
    old = RESULTS.read_text() if RESULTS.is_file() else "# Benchmarks\n"
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
    new = pattern.sub(lambda _m: text + "\n", old) if pattern.search(old) else (
        old.rstrip("\n") + "\n\n" + text
    )  # fmt: skip
    RESULTS.write_text(new.rstrip("\n") + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    ap.add_argument("--sizes", default="1,2,5,10", help="copies of the trace to time (1 = as is)")
    ap.add_argument(
        "--repeat", type=int, default=5, help="runs of each contender per size; the best is kept"
    )
    ap.add_argument(
        "--big-repeat",
        type=int,
        default=2,
        help="runs of each contender on the largest size (HTA takes about a minute there)",
    )
    ap.add_argument(
        "--no-hta", action="store_true", help="skip HolisticTraceAnalysis and traceinsight"
    )
    ap.add_argument(
        "--only",
        default=",".join(MODES + EXTRA),
        help=f"contenders to run (of {','.join(MODES + EXTRA)})",
    )
    ap.add_argument("--no-write", action="store_true", help="do not rewrite RESULTS.md")
    ap.add_argument(
        "--old", type=Path, help="another checkout to time beside this one (its own build)"
    )
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument(
        "--gunzip-only", action="store_true", help="only print the gunzip backends' table"
    )
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(*a.child)))
        return 0
    corpus = corpus_dir()
    if corpus is None:
        print(f"{TRACE_NAME} not found (set NBPROF_TRACE_CORPUS)", file=sys.stderr)
        return 2
    try:
        import nbprof.analysis  # noqa: F401

        analysis = True
    except ImportError:
        analysis = False
        print("nbprof.analysis not importable: timing the load alone")
    load_avg = " ".join(f"{x:.1f}" for x in os.getloadavg())
    src = corpus / TRACE_NAME
    if a.gunzip_only:
        big = sorted(OUT.glob(f"{src.name.split('.')[0]}_x*.json.gz"))
        big.sort(key=lambda f: f.stat().st_size)
        print("\n".join(render_gunzip(gunzip_backends(gz_files(corpus, big[-1] if big else None)))))
        return 0
    sizes = sorted({int(s) for s in a.sizes.split(",")})
    paths: dict[int, tuple[Path, int, int]] = {}
    for k in sizes:
        if k == 1:
            paths[k] = (src, 0, len(gzip.decompress(src.read_bytes())))
        else:
            print(f"writing the x{k} trace ...", flush=True)
            paths[k] = replicate(src, k)
    growth: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    global OLD_TREE, OLD_NAME
    if a.old is not None:
        OLD_TREE = a.old.resolve()
        rev = subprocess.run(
            ["git", "-C", str(OLD_TREE), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, check=False,
        ).stdout.strip()  # fmt: skip
        OLD_NAME = f"old tree ({rev})" if rev else "old tree"
    only = [m for m in MODES + EXTRA if m in a.only.split(",") and (m != "old" or OLD_TREE)]
    if a.no_hta:
        only = [m for m in only if m not in ("hta", "traceinsight")]
    full = {sizes[0], sizes[-1]}  # every contender: the file as is and the largest
    for k in sizes:
        path, n, size = paths[k]
        rep = a.big_repeat if k == sizes[-1] and k != sizes[0] else a.repeat
        modes = only if k in full else [m for m in only if m == "nbprof"]
        print(f"x{k}: {', '.join(modes)}, {rep} rounds", flush=True)
        got = interleaved(modes, path, rep, a.timeout)
        nb = got.get("nbprof", {"error": "not run"})
        if "error" in nb:
            print(f"  nbprof: {nb['error']}")
        else:
            n = nb["events"]
            growth.append({"events": n, "json_bytes": size, "load_s": nb["load_s"],
                           "analyze_s": nb.get("analyze_s", 0), "times": nb["times"]})  # fmt: skip
        if k not in full:
            continue
        name = "df_index_resolver" if k == 1 else f"df_index_resolver x{k}"
        n = next((g["events"] for g in got.values() if "events" in g), n)
        rows.append({"name": name, "events": n, "json_bytes": size, "got": got, "rounds": rep})
    print("gunzip backends ...", flush=True)
    gunzip = gunzip_backends(gz_files(corpus, paths[sizes[-1]][0]))
    text = render(rows, growth, analysis, load_avg, a.repeat, a.big_repeat, gunzip)
    print()
    print(text)
    if not a.no_write:
        write_section(text)
        print(f"rewrote '{SECTION}' in {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
