"""The comparison's JavaScript (nbprof/views/js/compare_*.js), run under Node.

Each file is a Bokeh callback body; Node runs it as Bokeh does, as ``new Function(args...,
body)``, with plain objects standing in for the ranges. Skipped where Node is absent.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest

from nbprof.views.compare import asset

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="needs Node.js")


def node(script: str) -> Any:
    assert NODE is not None
    p = subprocess.run([NODE, "-e", script], capture_output=True, text=True, check=True)
    return json.loads(p.stdout)


def body(name: str) -> str:
    return json.dumps(asset(name))


def test_link_moves_the_other_range_to_the_same_shared_window() -> None:
    out = node(
        f"""
        const link = new Function("cb_obj", "dst", "shift", {body("compare_link.js")});
        const calls = [];
        const range = (start, end) => ({{start, end, setv(v) {{ calls.push(v);
          Object.assign(this, v); }}}});
        const a = range(0, 100), b = range(40, 140);
        a.start = 10; a.end = 30;
        link(a, b, 40);               // b's origin is 40 µs later in its coordinates
        const first = [b.start, b.end];
        link(b, a, -40);              // b's own callback: a is already there, no bounce
        link(a, b, 40);
        console.log(JSON.stringify({{first, calls}}));
        """
    )
    assert out["first"] == [50, 70]
    assert out["calls"] == [{"start": 50, "end": 70}]


def test_ticks_sit_at_round_times_since_the_origin() -> None:
    out = node(
        f"""
        const ticker = new Function("cb_data", "shift", {body("compare_ticker.js")});
        const shift = 156.0;
        const major = ticker({{start: -2000, end: 1000000}}, shift);
        const minor = ticker({{start: -2000, end: 1000000, major_ticks: major}}, shift);
        const empty = ticker({{start: 5, end: 5}}, shift);
        console.log(JSON.stringify({{major: major.map(t => t - shift),
          minor: minor.length, empty}}));
        """
    )
    # The window is [-2156, 999844] µs of the shared scale: 1.002 s / 8 rounds up to a
    # 200 ms step (1-2-5 series), so 0 .. 800 ms; minor ticks every 40 ms: 0 .. 960 ms.
    assert out["major"] == pytest.approx([0, 200_000, 400_000, 600_000, 800_000])
    assert out["minor"] == 960 // 40 + 1
    assert out["empty"] == []


def test_tick_labels_read_time_since_the_origin() -> None:
    out = node(
        f"""
        const label = new Function("tick", "shift", {body("compare_tick_labels.js")});
        console.log(JSON.stringify([label(156, 156), label(200156, 156), label(1500156, 156),
          label(156 + 12.5, 156), label(1e9 + 156, 156)]));
        """
    )
    assert out == ["0 µs", "200 ms", "1.5 s", "12.5 µs", "1000 s"]
