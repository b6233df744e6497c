"""Run the browser's drawing code (nbprof/views/js) under Node on a built timeline.

The level of detail exists once, in JavaScript; the Python tests check what it draws for
a timeline by passing its timeline document to tests/js/draw_cli.mjs.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nbprof.views.timeline import wire

NODE = shutil.which("node")
DRAW_CLI = Path(__file__).resolve().parent / "js" / "draw_cli.mjs"


def need_node() -> str:
    if NODE is None:
        pytest.skip("node not found (the front-end tests need Node 18 or newer)")
    return NODE


def node_eval(script: str, stdin: str = "") -> Any:
    """What an ES module script run by Node prints, as JSON."""
    r = subprocess.run(
        [need_node(), "--input-type=module", "-e", script],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _plain(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return [None if isinstance(x, float) and np.isnan(x) else x for x in v.tolist()]
    return list(v)


def source(tl: Any, name: str) -> dict[str, list[Any]]:
    """The columns of the Bokeh data source ``name`` of a built timeline."""
    found = list(tl.layout.select({"name": name}))
    assert len(found) == 1, f"{name}: {len(found)} models"
    return {k: _plain(v) for k, v in found[0].data.items()}


def draw(
    tl: Any,
    x0: float | None = None,
    x1: float | None = None,
    *,
    width: float = 1000.0,
    query: str | None = None,
    collapsed: list[bool] | None = None,
    pane: bool = False,
    strict: bool = False,
) -> dict[str, Any]:
    """What the browser draws for the window [x0, x1] (default: the full view), with the
    rank groups ``collapsed`` folded (default: as the document starts); ``pane``: also
    each event's details-pane rows; ``strict``: fail on reading a field the document
    lacks."""
    node = need_node()
    main = next(iter(tl.layout.select({"name": "nbprof-timeline"})))
    lo, hi = main.x_range.start, main.x_range.end
    q = {
        "pack": wire.pack(tl.meta, tl.parts),
        "x0": lo if x0 is None else x0,
        "x1": hi if x1 is None else x1,
        "width": width,
        "query": query,
        "collapsed": collapsed,
        "pane": pane,
        "strict": strict,
    }
    r = subprocess.run(
        [node, str(DRAW_CLI)],
        input=json.dumps(q),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def detail(out: dict[str, Any]) -> dict[str, list[Any]]:
    """The exact events drawn, all hover kinds together (columns as in one source)."""
    cols: dict[str, list[Any]] = {}
    for kind in out["detail"]:
        for k, v in out["detail"][kind].items():
            cols.setdefault(k, []).extend(v)
    cols["tip"] = [kind for kind in out["detail"] for _ in out["detail"][kind]["i"]]
    return cols
