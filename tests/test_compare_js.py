"""The comparison's JavaScript (nbprof/views/js/compare*.js), run under Node.

compare.mjs is an ES module (imported, as the other front-end files' tests do); the ticker
and tick-label files are Bokeh callback bodies, run as Bokeh does, ``new Function(args...,
body)``. Plain objects stand in for Bokeh's ranges. Skipped without Node.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from nbprof.views.assets import asset

REPO = Path(__file__).resolve().parent.parent

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="needs Node.js")


def node(script: str) -> Any:
    assert NODE is not None
    p = subprocess.run(
        [NODE, "--input-type=module", "-e", script], capture_output=True, text=True, check=True
    )
    return json.loads(p.stdout)


def body(name: str) -> str:
    return json.dumps(asset(name))


JS = REPO / "nbprof" / "views" / "js"


def test_link_moves_each_range_to_the_others_window() -> None:
    out = node(
        f"""
        const {{ link }} = await import({json.dumps(str(JS / "compare.mjs"))});
        // Bokeh ranges, as far as compare.mjs uses them: properties' change signals,
        // connect(signal, slot), and setv emitting a change of each property set.
        const range = (start, end) => {{
          const r = {{ start, end, calls: [], slots: {{start: [], end: []}} }};
          r.properties = {{ start: {{ change: "start" }}, end: {{ change: "end" }} }};
          r.connect = (signal, slot) => r.slots[signal].push(slot);
          r.setv = (v) => {{ r.calls.push(v); Object.assign(r, v);
            for (const k of Object.keys(v)) for (const s of r.slots[k]) s(); }};
          return r;
        }};
        const before = range(-10, 1000), after = range(290, 1300);
        link(before, after, 300);     // the after run's origin is 300 µs later in its own
        before.setv({{ start: 100, end: 200 }});
        const first = [after.start, after.end];
        after.setv({{ start: 350, end: 450 }});
        console.log(JSON.stringify({{ first, back: [before.start, before.end],
          afterCalls: after.calls.length, beforeCalls: before.calls.length }}));
        """
    )
    assert out["first"] == [400, 500]
    assert out["back"] == [50, 150]
    # Each range moved once per change of the other, never bounced back and forth: the
    # before range was set twice (by the test, then by the link), the after one likewise.
    assert out["afterCalls"] == 2 and out["beforeCalls"] == 2


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
        globalThis.nbprof = {{ format: await import({json.dumps(str(JS / "format.mjs"))}) }};
        const label = new Function("tick", "shift", {body("compare_tick_labels.js")});
        console.log(JSON.stringify([label(156, 156), label(200156, 156), label(1500156, 156),
          label(156 + 12.5, 156), label(156 - 300, 156)]));
        """
    )
    # The timeline's own format (format.mjs fmtTime), from each run's origin.
    assert out == ["0 µs", "200 ms", "1.5 s", "12.5 µs", "-300 µs"]
