"""What nbprof's outputs weigh in a saved notebook, for two checkouts side by side.

For each checkout (``--tree NAME=PATH``; this one when none is given), in a process of its
own with that checkout first on ``sys.path``:

- the load bundle (BokehJS and the loader, once per notebook), as a notebook stores it;
- a dashboard's notebook output after the first (BokehJS left to the load bundle) for the
  synthetic 10k-kernel trace of tests/views_data.py and for the ResNet-50 corpus trace;
- a comparison's output (the two ResNet-50 corpus traces, 0 and 4 data-loading workers);
- with ``--notebooks``, each teaching notebook saved after Run All without a GPU
  (tests/offline_kernel.py, as tests/test_notebooks.py runs them), and its largest output.

Sizes are of the output as nbformat writes it into the .ipynb (its JSON, escapes included),
in bytes. Needs NBPROF_TRACE_CORPUS for the corpus rows.

    python benchmarks/bench_weight.py --tree before=/path/to/main --tree after=. [--notebooks]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESNET = "kineto-tbplugin__resnet50_num_workers_{}__worker0.{}.pt.trace.json.gz"
RESNET_STAMPS = {0: "1623143089861", 4: "1623212756351"}


def _stored(bundle: dict[str, Any]) -> int:
    """Bytes an output with this mime bundle takes in a saved notebook."""
    import nbformat

    out = nbformat.v4.new_output("display_data", data=bundle)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(outputs=[out])])
    empty = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell()])
    return len(nbformat.writes(nb)) - len(nbformat.writes(empty))


def measure_outputs() -> dict[str, int]:
    """The sizes of this process's nbprof (the checkout first on sys.path)."""
    import nbprof
    from nbprof.views import compare, dashboard

    sys.path.insert(0, str(Path(nbprof.__file__).resolve().parents[1] / "tests"))
    from views_data import synthetic_profile

    sizes = {"load bundle": _stored(dashboard.loader_bundle())}

    def shown(html: str) -> int:
        return _stored({"text/html": html, "text/plain": "nbprof"})

    sizes["dashboard, synthetic 10k kernels"] = shown(
        dashboard.fragment(synthetic_profile(10_000), include_bokeh_js=False)
    )
    corpus = os.environ.get("NBPROF_TRACE_CORPUS")
    if corpus:
        runs = [
            nbprof.load(Path(corpus) / RESNET.format(w, RESNET_STAMPS[w]), progress=False)
            for w in (0, 4)
        ]
        kernels = len(runs[0].kernels)
        sizes[f"dashboard, ResNet-50 ({kernels:,} kernels)"] = shown(
            dashboard.fragment(runs[0], include_bokeh_js=False)
        )
        sizes["comparison, ResNet-50 0 vs 4 workers"] = shown(
            compare.fragment(nbprof.compare(runs[0], runs[1]), include_bokeh_js=False)
        )
    return sizes


def measure_notebooks(tree: Path) -> dict[str, int]:
    """Each teaching notebook of ``tree``, saved after Run All, and its largest output."""
    sys.path.insert(0, str(REPO / "tests"))
    from offline_kernel import execute, offline_env

    out: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="bench-weight-") as tmp:
        base = Path(tmp)
        env = offline_env(base, dict(os.environ), [Path(os.environ["NBPROF_TRACE_CORPUS"])])
        env.update(
            PYTHONPATH=str(tree),
            NBPROF_CACHE_DIR=str(base / "cache"),
            NBPROF_TABLE_CACHE=str(base / "tables"),
        )
        for path in sorted((tree / "notebooks").glob("*.ipynb")):
            run = execute(path, env, base)
            out[f"notebook {path.stem}, saved"] = run.saved_bytes
            # The largest output drawn from a trace (the load bundle is its own row).
            largest = max(
                (
                    len(json.dumps(o))
                    for c in run.nb.cells
                    for o in c.get("outputs", [])
                    if "text/html" in o.get("data", {})
                ),
                default=0,
            )
            out[f"notebook {path.stem}, largest HTML output"] = largest
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", action="append", default=[], help="NAME=PATH of a checkout")
    ap.add_argument("--notebooks", action="store_true", help="also run the teaching notebooks")
    ap.add_argument("--_measure", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args._measure:
        print(json.dumps(measure_outputs()))
        return
    trees = [t.split("=", 1) for t in args.tree] or [["this", str(REPO)]]
    results: dict[str, dict[str, int]] = {}
    for name, path in trees:
        tree = Path(path).resolve()
        env = dict(os.environ, PYTHONPATH=str(tree))
        done = subprocess.run(
            [sys.executable, __file__, "--_measure"],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        results[name] = json.loads(done.stdout.strip().splitlines()[-1])
        if args.notebooks:
            results[name].update(measure_notebooks(tree))
    rows = list(dict.fromkeys(k for r in results.values() for k in r))
    print("| output | " + " | ".join(f"{n} (bytes)" for n in results) + " |")
    print("|---|" + "---:|" * len(results))
    for row in rows:
        cells = [f"{results[n][row]:,}" if row in results[n] else "-" for n in results]
        print(f"| {row} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
