"""Trace load + analysis speed and memory, side by side with orjson and HolisticTraceAnalysis.

On ``hta__df_index_resolver`` (216k events, 54 MB of JSON) from the trace corpus, and on
bigger traces made by replicating its events with shifted times (and shifted correlation,
flow and external ids, so every link stays unique), written to ``benchmarks/out/``:

* ``nbprof.load`` (the trace reader) then ``nbprof.analysis.analyze`` on the result;
* gunzip + ``orjson.loads`` of the same file (a generic parse, nothing built on top);
* HolisticTraceAnalysis's ``TraceAnalysis`` load of a folder holding the same file.

Each measurement runs in its own subprocess; peak memory is that process's peak RSS
(shown whole, and above the process's size after its imports). The section "Trace load and
analysis" of ``benchmarks/RESULTS.md`` is rewritten with what this run measured.

    python benchmarks/bench_load.py [--sizes 1,2,5,10] [--repeat 2] [--no-hta] [--no-write]
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


def replicate(src: Path, copies: int) -> tuple[Path, int, int]:
    """``src`` with its events repeated ``copies`` times back to back: (path, events, bytes).

    Written piece by piece (one copy in memory at a time); reused when already there.
    """
    import orjson

    OUT.mkdir(parents=True, exist_ok=True)
    dst = OUT / f"{src.name.split('.')[0]}_x{copies}.json.gz"
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
            put(orjson.dumps(events)[1:-1])
            n += len(events)
        put(b"]}")
    dst.with_suffix(".tmp").rename(dst)
    meta.write_text(json.dumps({"events": n, "json_bytes": written}))
    return dst, n, written


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


def child(mode: str, path: str) -> dict[str, Any]:
    out: dict[str, Any] = {"mode": mode}
    if mode == "nbprof":
        import pandas  # noqa: F401 (a dependency: counted in the size after imports)

        from nbprof.result import load

        try:
            from nbprof.analysis import analyze
        except ImportError:
            analyze = None  # type: ignore[assignment]
        out["base_mb"] = _rss_mb()
        t0 = time.perf_counter()
        prof = load(path, progress=False)
        t1 = time.perf_counter()
        out["load_s"] = t1 - t0
        out["load_mb"] = _rss_mb()
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
        import logging

        from hta.trace_analysis import TraceAnalysis

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
    out["peak_mb"] = _rss_mb()
    return out


def measure(mode: str, path: Path, timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", mode, str(path)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"mode": mode, "error": f"over {timeout:.0f} s"}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
        return {"mode": mode, "error": f"exit {p.returncode}: {tail[:200]}"}
    return json.loads(lines[-1])


def best(mode: str, path: Path, repeat: int, timeout: float) -> dict[str, Any]:
    runs = [measure(mode, path, timeout) for _ in range(repeat)]
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[-1]
    key = "analyze_s" if mode == "nbprof" else "load_s"
    return min(ok, key=lambda r: r["load_s"] + (r.get(key, 0) if key == "analyze_s" else 0))


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
    return (
        f"{cpu}, {os.cpu_count()} cores{mem}; {platform.system()} {platform.release()}; "
        f"Python {platform.python_version()}, numpy {numpy.__version__}, pandas "
        f"{pandas.__version__}, msgspec {msgspec.__version__}, orjson {orjson.__version__}, "
        f"HolisticTraceAnalysis {hta_v}"
    )


def fmt(v: float | None, nd: int = 2) -> str:
    return "n/a" if v is None else f"{v:.{nd}f}"


def render(rows: list[dict[str, Any]], growth: list[dict[str, Any]], analysis: bool,
           load_avg: str, repeat: int) -> str:  # fmt: skip
    today = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        SECTION,
        "",
        f"Measured by `python benchmarks/bench_load.py` on {today}.",
        "",
        f"Machine: {machine()}.",
        "",
        f"Load average at the start: {load_avg}. Other work was running on this machine, so",
        f"each time is the best of {repeat} runs (HolisticTraceAnalysis: one run, it is slow).",
        "",
        "Each cell is one subprocess. Memory is the process's peak RSS (`VmHWM`); in",
        "brackets, its growth above the size of the process after its imports.",
        "",
    ]
    if not analysis:
        lines += ["`nbprof.analysis.analyze` was not importable: nbprof times are load only.", ""]
    lines += [
        "| trace | events | JSON MiB | nbprof.load s | + analyze s | load + analyze s | "
        "gunzip + orjson.loads s | HTA TraceAnalysis s | nbprof peak MiB | orjson peak MiB | "
        "HTA peak MiB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        nb, oj, ht = r["nbprof"], r["orjson"], r["hta"]

        def mem(m: dict[str, Any]) -> str:
            if "error" in m or "peak_mb" not in m:
                return m.get("error", "not run")
            return f"{m['peak_mb']:.0f} (+{m['peak_mb'] - m['base_mb']:.0f})"

        def sec(m: dict[str, Any]) -> str:
            return m.get("error", "not run") if "load_s" not in m else f"{m['load_s']:.2f}"

        total = nb.get("load_s", 0) + nb.get("analyze_s", 0) if "load_s" in nb else None
        lines.append(
            f"| {r['name']} | {r['events']:,} | {r['json_bytes'] / MB:.0f} | {sec(nb)} | "
            f"{fmt(nb.get('analyze_s'))} | {fmt(total)} | {sec(oj)} | {sec(ht)} | "
            f"{mem(nb)} | {mem(oj)} | {mem(ht)} |"
        )
    lines += ["", "Targets (issue 2), from the numbers above:", ""]
    for r in rows:
        nb, oj, ht = r["nbprof"], r["orjson"], r["hta"]
        if "load_s" not in nb:
            continue
        total = nb["load_s"] + nb.get("analyze_s", 0)
        parts = [f"- {r['name']}:"]
        if "load_s" in oj:
            parts.append(
                f"load + analysis {total:.2f} s vs gunzip + orjson.loads {oj['load_s']:.2f} s "
                f"({'met' if total <= oj['load_s'] else 'NOT met'}: no slower);"
            )
        if "load_s" in ht:
            x = ht["load_s"] / total
            parts.append(f"{x:.1f}x faster than HTA's load ({'met' if x >= 6 else 'NOT met'}: 6x);")
        ratio = nb["peak_mb"] * MB / r["json_bytes"]
        grow = (nb["peak_mb"] - nb["base_mb"]) * MB / r["json_bytes"]
        verdict = "met" if ratio <= 3 else ("met above the imports" if grow <= 3 else "NOT met")
        parts.append(
            f"peak memory {ratio:.2f}x the JSON size ({grow:.2f}x above the imports) "
            f"({verdict}: 3x)."
        )
        lines.append(" ".join(parts))
    if growth:
        lines += [
            "",
            "Growth with size (`nbprof.load` alone, and with analysis):",
            "",
            "| events | load s | load µs/event | load + analyze s | µs/event |",
            "|---:|---:|---:|---:|---:|",
        ]
        for g in growth:
            tot = g["load_s"] + g.get("analyze_s", 0)
            lines.append(
                f"| {g['events']:,} | {g['load_s']:.2f} | {g['load_s'] / g['events'] * 1e6:.2f} |"
                f" {tot:.2f} | {tot / g['events'] * 1e6:.2f} |"
            )
    return "\n".join(lines) + "\n"


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
    ap.add_argument("--repeat", type=int, default=2, help="runs per cell; the best is kept")
    ap.add_argument("--no-hta", action="store_true", help="skip HolisticTraceAnalysis")
    ap.add_argument("--no-write", action="store_true", help="do not rewrite RESULTS.md")
    ap.add_argument("--timeout", type=float, default=900)
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
    full = {sizes[0], sizes[-1]}  # compared with orjson and HTA: the file as is and the largest
    for k in sizes:
        path, n, size = paths[k]
        rep = a.repeat
        print(f"x{k}: nbprof ...", flush=True)
        nb = best("nbprof", path, rep, a.timeout)
        if "error" in nb:
            print(f"  nbprof failed: {nb['error']}")
            continue
        n = nb["events"]
        growth.append({"events": n, "load_s": nb["load_s"], "analyze_s": nb.get("analyze_s", 0)})
        if k not in full:
            continue
        print(f"x{k}: orjson ...", flush=True)
        oj = best("orjson", path, rep, a.timeout)
        ht: dict[str, Any] = {"error": "skipped (--no-hta)"}
        if not a.no_hta:
            print(f"x{k}: HolisticTraceAnalysis ...", flush=True)
            ht = best("hta", path, 1, a.timeout)
        name = "df_index_resolver" if k == 1 else f"df_index_resolver x{k}"
        rows.append({"name": name, "events": n, "json_bytes": size, "nbprof": nb, "orjson": oj,
                     "hta": ht})  # fmt: skip
    text = render(rows, growth, analysis, load_avg, a.repeat)
    print()
    print(text)
    if not a.no_write:
        write_section(text)
        print(f"rewrote '{SECTION}' in {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
