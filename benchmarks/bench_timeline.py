"""Timeline size and first paint for synthetic traces of 10k, 100k and 1M kernels.

For each size: build the standalone report (Python time), its size on disk, the size of
the dashboard's notebook output (BokehJS left to the page's load bundle), and in headless
Chromium the time to first paint: from navigation start until nbprof's front end has drawn
the first view into its data sources (js/timeline.mjs marks the timeline ready) and one
more animation frame has run (the one Bokeh paints in), read from ``performance.now()``.
Then one zoom to 1/2000 of the span: time until the exact events of the window are in the
data sources (js/draw.mjs), and the glyph counts.

    python benchmarks/bench_timeline.py [--sizes 10000 100000 1000000] [--keep DIR]

Needs Debian's Chromium at /usr/bin/chromium and the Python playwright package.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

# Polled once per animation frame: the frame after the one in which js/timeline.mjs drew the
# first view into the data sources and marked the timeline ready (Bokeh paints on that frame).
_READY = """() => {
  const t = document.querySelector('.nbp-timeline[data-nbp-ready]');
  if (!t) { return false; }
  if (window.__nbp_seen === undefined) { window.__nbp_seen = true; return false; }
  return performance.now();
}"""

_API = "document.querySelector('.nbp-timeline')._nbprof"

_COUNTS = f"""() => {{
  const a = {_API}, g = n => a.doc.get_model_by_name(n);
  const det = ['kernel', 'gpu', 'runtime', 'cpu'].reduce(
    (s, t) => s + g('nbprof-detail-' + t).get_length(), 0);
  return [det, g('nbprof-aggregate').get_length()];
}}"""

_ZOOM = f"""(frac) => {{
  const a = {_API}, [s, e] = a.full, m = s + (e - s) * 0.5;
  window.__t0 = performance.now();
  a.setRange(m, m + (e - s) * frac);
}}"""

_ZOOMED = f"""() => {{
  const [det, agg] = ({_COUNTS})();
  if (det === 0) {{ return false; }}
  return [performance.now() - window.__t0, det, agg];
}}"""


def run(sizes: list[int], keep: Path | None) -> list[dict[str, float | int]]:
    from playwright.sync_api import sync_playwright
    from views_data import synthetic_profile

    from nbprof.views import dashboard, report

    out_dir = keep or Path(tempfile.mkdtemp(prefix="nbprof-bench-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, float | int]] = []
    report.render(synthetic_profile(100))  # import Bokeh once, outside the timed builds
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        for n in sizes:
            p = synthetic_profile(n)
            events = (
                len(p.trace.kernels)
                + len(p.trace.runtime)
                + len(p.trace.cpu_ops)
                + len(p.trace.steps)
            )
            t = time.perf_counter()
            html = report.render(p)
            build_s = time.perf_counter() - t
            path = out_dir / f"timeline_{n}.html"
            path.write_text(html, encoding="utf-8")
            size_mb = path.stat().st_size / 1e6
            output_kb = len(dashboard.fragment(p, include_bokeh_js=False).encode()) / 1e3
            paints = []
            for _ in range(3):
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                errors: list[str] = []
                page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
                page.goto(path.as_uri(), wait_until="commit", timeout=120_000)
                paint_ms = page.wait_for_function(
                    _READY, polling="raf", timeout=120_000
                ).json_value()
                paints.append(paint_ms)
                initial = page.evaluate(_COUNTS)
                page.evaluate(_ZOOM, 1 / 2000)
                zoom_ms, det, agg = page.wait_for_function(
                    _ZOOMED, polling="raf", timeout=60_000
                ).json_value()
                if errors:
                    raise RuntimeError(f"page errors for {n}: {errors}")
                page.close()
            rows.append(
                {
                    "kernels": n,
                    "events": events,
                    "build_s": round(build_s, 2),
                    "size_mb": round(size_mb, 2),
                    "notebook_output_kb": round(output_kb),
                    "first_paint_ms_median": round(sorted(paints)[1]),
                    "first_paint_ms_runs": [round(x) for x in paints],
                    "initial_exact": initial[0],
                    "initial_aggregate": initial[1],
                    "zoom_ms": round(zoom_ms),
                    "zoom_exact": det,
                    "zoom_aggregate": agg,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
        browser.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--keep", type=Path, default=None, help="write the reports here")
    args = ap.parse_args()
    cpu = platform.processor() or platform.machine()
    print(f"# {platform.node()} · {cpu} · Python {platform.python_version()}")
    rows = run(args.sizes, args.keep)
    print()
    print(
        "| kernels | events | report size | notebook output | Python build "
        "| first paint (median of 3) | zoom to 1/2000 | glyphs at first paint "
        "(exact / aggregate) | glyphs zoomed |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['kernels']:,} | {r['events']:,} | {r['size_mb']:.1f} MB "
            f"| {r['notebook_output_kb']:,} KB | {r['build_s']:.1f} s "
            f"| {r['first_paint_ms_median'] / 1000:.2f} s | {r['zoom_ms']} ms "
            f"| {r['initial_exact']:,} / {r['initial_aggregate']:,} "
            f"| {r['zoom_exact']:,} / {r['zoom_aggregate']:,} |"
        )


if __name__ == "__main__":
    main()
