"""Load times of two hostile traces, before and after a change, side by side in one run.

* **Same timestamp**: N CPU ops on one thread, every one at the same start with the same
  duration, so each encloses the next (nesting N deep), plus one runtime call after them
  all. Nesting once cost a pass over all ops per level (quadratic).
* **Whitespace**: one kernel event with M MB of JSON whitespace between ``[`` and it (and
  as much between it and ``]``). The spaces around the event array were once scanned by a
  Python loop over bytes.

Each trace is generated into ``benchmarks/out/`` (nothing kept in the repository) and
loaded with ``nbprof.load`` in a fresh subprocess, once per round, the code trees taking
turns: this checkout ("after") and, with ``--before DIR``, another tree of nbprof (e.g.
``git archive main | tar -x -C /tmp/before``). A run past ``--timeout`` is reported as
such. The section "Hostile input" of ``benchmarks/RESULTS.md`` is rewritten.

    python benchmarks/bench_hostile.py [--before DIR] [--ops 80000,160000,320000,1000000]
                                       [--space-mb 30,100] [--repeat 3] [--timeout 300]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "benchmarks" / "out"
RESULTS = REPO / "benchmarks" / "RESULTS.md"
SECTION = "## Hostile input: ops sharing one timestamp, whitespace around the events"

_CHILD = """
import json, sys, time
import nbprof, nbprof.trace  # imported before the clock starts
assert nbprof.__file__.startswith(sys.argv[2]), nbprof.__file__
t = time.perf_counter()
tr = nbprof.load(sys.argv[1], progress=False).trace
print(json.dumps({"s": time.perf_counter() - t, "ops": len(tr.cpu_ops),
                  "depth": int(tr.cpu_ops["depth"].max()) if len(tr.cpu_ops) else 0}))
"""


def same_timestamp(n: int) -> Path:
    """N ops at one instant, each [T0, T0 + 10] us, and a runtime call at T0 + 20 us."""
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"same_ts_{n}.json"
    if path.is_file():
        return path
    op = b'{"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":1000,"dur":10},'
    call = (b'{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,'
            b'"ts":1020,"dur":1,"args":{"correlation":1}}')  # fmt: skip
    with path.open("wb") as f:
        f.write(b'{"traceEvents":[')
        for start in range(0, n, 100_000):
            f.write(op * min(100_000, n - start))
        f.write(call + b"]}")
    return path


def whitespace(mb: int) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"whitespace_{mb}mb.json"
    if path.is_file():
        return path
    ev = b'{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":10,"dur":5,"args":{}}'
    pad = b" \n\t\r" * (mb * 2**20 // 8)
    with path.open("wb") as f:
        f.write(b'{"traceEvents":[' + pad)
        f.write(ev + pad + b"]}")
    return path


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def load_once(tree: Path, path: Path, timeout: float) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    t = time.perf_counter()
    try:
        # Run from the tree itself: ``python -c`` puts the working folder first on sys.path.
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, str(path.resolve()), str(tree)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=tree,
        )
    except subprocess.TimeoutExpired:
        return {"timeout": True, "wall": time.perf_counter() - t}
    if done.returncode != 0:
        raise RuntimeError(f"{tree}: {path.name}: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def fmt(runs: list[dict[str, Any]], timeout: float) -> str:
    if any(r.get("timeout") for r in runs):
        return f"> {timeout:.0f} (timed out)"
    times = sorted(r["s"] for r in runs)
    best = times[0]
    if len(times) == 1:
        return f"**{best:.2f}**"
    return f"**{best:.2f}** ({times[0]:.2f}-{times[-1]:.2f}, {len(times)} runs)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", type=Path, help="another nbprof tree to time beside this one")
    ap.add_argument("--before-label", default="before", help="what to call it in the table")
    ap.add_argument("--ops", default="80000,160000,320000,1000000")
    ap.add_argument("--space-mb", default="30,100")
    ap.add_argument("--repeat", type=int, default=3, help="rounds (the best run is shown)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per load")
    ap.add_argument("--no-write", action="store_true", help="do not rewrite RESULTS.md")
    a = ap.parse_args()

    trees = [("after", REPO)]
    if a.before is not None:
        trees.insert(0, (a.before_label, a.before.resolve()))
    cases: list[tuple[str, Path, int]] = []
    for n in [int(x) for x in a.ops.split(",") if x]:
        cases.append((f"{n:,} ops at one timestamp (nested {n:,} deep)", same_timestamp(n), 0))
    for mb in [int(x) for x in a.space_mb.split(",") if x]:
        label = f"{mb} MB of whitespace on each side of one event"
        cases.append((label, whitespace(mb), mb))
    load = os.getloadavg()
    started = dt.datetime.now(dt.timezone.utc)
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for label, path, _ in cases:
        timed_out: set[str] = set()
        for _ in range(a.repeat):
            for name, tree in trees:
                if name in timed_out:  # once past the timeout, not again
                    continue
                r = load_once(tree, path, a.timeout)
                results.setdefault((label, name), []).append(r)
                if r.get("timeout"):
                    timed_out.add(name)
                print(f"{label} [{name}]: {r}", flush=True)
    end_load = os.getloadavg()

    names = [n for n, _ in trees]
    lines = [
        SECTION,
        "",
        f"Measured by `python benchmarks/bench_hostile.py` on "
        f"{started:%Y-%m-%d %H:%M} UTC: {_cpu()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}. Load average (1/5/15 "
        f"min) {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at the start, "
        f"{end_load[0]:.1f} {end_load[1]:.1f} {end_load[2]:.1f} at the end (a shared "
        "machine: single timings are noisy).",
        "",
        "Seconds for `nbprof.load` (after the imports) in a fresh process, best run, then the "
        f"range; {a.repeat} rounds, the trees taking turns; a tree past the "
        f"{a.timeout:.0f} s timeout is not run again on that case. Traces are generated by "
        "the script (see its docstring).",
        "",
        "| case | file MB | " + " | ".join(names) + " |",
        "|---|---:|" + "---:|" * len(names),
    ]
    for label, path, _ in cases:
        size = path.stat().st_size / 1e6
        cells = [fmt(results[(label, n)], a.timeout) for n in names]
        lines.append(f"| {label} | {size:.0f} | " + " | ".join(cells) + " |")
    if a.before is not None:
        lines += [
            "",
            f"`{a.before_label}` is the tree at `{a.before}`; `after` is this checkout.",
        ]
    text = "\n".join(lines) + "\n"
    print(text)
    if not a.no_write:
        old = RESULTS.read_text() if RESULTS.is_file() else "# Benchmark results\n"
        pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
        new = pattern.sub(text + "\n", old) if pattern.search(old) else old + "\n" + text
        RESULTS.write_text(new.rstrip("\n") + "\n")
        print(f"rewrote '{SECTION}' in {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
