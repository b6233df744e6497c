"""Pixels that tell the truth when zoomed out: on each lane, a class's share of the painted
pixels is within a few points of its share of the lane's busy time.

What the browser draws for a window (tests/js_draw.py runs nbprof/views/js/draw.mjs) is
painted here as a canvas would: each glyph of the drawn sources in the order of their
renderers, later ones over earlier ones, at 4 samples a pixel across and 16 down a row,
widened by its outline's width when it has one (read from the Bokeh glyph). On a
zoomed-out view most events are far narrower than a pixel; drawn one by one, the last one
drawn wins the pixel and an outline widens each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pytest
from js_draw import draw, need_node

import nbprof
from nbprof.views import timeline
from nbprof.views._style import CLASS_IDS, CLASSES
from nbprof.views.timeline.store import EVENT_COLUMNS, Lane, pack

#: Samples per pixel across, and per row down.
ACROSS, DOWN = 4, 16
#: How far (percentage points) a class's share of a lane's pixels may be from its share
#: of the lane's busy time.
POINTS = 5.0
QWEN = "tracelens__h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"


@dataclass
class Glyphs:
    """The columns of one drawn source and the outline width its glyph adds (px)."""

    cols: dict[str, list[Any]]
    stroke_px: float


def drawn_in_order(tl: Any, out: dict[str, Any]) -> list[Glyphs]:
    """The bars ``draw`` filled, in the order the main figure's renderers paint them."""
    by_source = {tl.doc.sources.aggregate.name: out["agg"]} | {
        tl.doc.sources.detail[k].name: v for k, v in out["detail"].items()
    }
    main = next(iter(tl.layout.select({"name": "nbprof-timeline"})))
    glyphs = []
    for r in main.renderers:
        cols = by_source.get(getattr(r.data_source, "name", None))
        if cols is None:
            continue
        g = r.glyph
        stroke = float(g.line_width) if g.line_color is not None else 0.0
        glyphs.append(Glyphs(cols, stroke))
    assert len(glyphs) == len(by_source), "every drawn source has its renderer"
    return glyphs


def painted(glyphs: list[Glyphs], row: float, x0: float, x1: float, width: int,
            bar: float) -> np.ndarray:  # fmt: skip
    """The colour painted at each sample of one row (``""``: nothing)."""
    canvas = np.full((DOWN, width * ACROSS), "", dtype=object)
    sx = (np.arange(width * ACROSS) + 0.5) / ACROSS  # sample centres, px
    sy = row - bar / 2 + (np.arange(DOWN) + 0.5) / DOWN * bar
    px_per_us = width / (x1 - x0)
    for g in glyphs:
        c = g.cols
        for left, right, lo, hi, colour in zip(c["left"], c["right"], c["bottom"], c["top"],
                                               c["color"], strict=True):  # fmt: skip
            if abs(lo - (row - bar / 2)) > 1e-6:
                continue  # another row's bar (every bar hangs from its row's top edge)
            a = (left - x0) * px_per_us - g.stroke_px / 2
            b = (right - x0) * px_per_us + g.stroke_px / 2
            cols = (sx >= a) & (sx <= b)
            rows = (sy >= min(lo, hi)) & (sy <= max(lo, hi))
            if cols.any() and rows.any():
                canvas[np.ix_(rows, cols)] = colour
    return canvas


def busy_shares(tl: Any, lane: int, x0: float, x1: float) -> dict[int, float]:
    """Per class id, its share of the lane's busy time in [x0, x1] (read from the data)."""
    d = tl.data
    a, b = int(d.lane_offsets[lane]), int(d.lane_offsets[lane + 1])
    s, e = d.x[a:b], d.x[a:b] + d.dur[a:b]
    t = np.clip(np.minimum(e, x1) - np.maximum(s, x0), 0, None)
    cls = d.sigs["cls"].to_numpy()[d.sig[a:b]]
    total = t.sum()
    return {int(k): float(t[cls == k].sum() / total) for k in np.unique(cls)}


def pixel_shares(canvas: np.ndarray, colours: list[str]) -> dict[int, float]:
    ink = canvas[canvas != ""]
    return {k: float((ink == c).mean()) for k, c in enumerate(colours) if (ink == c).any()}


def assert_honest(tl: Any, lane: int, width: int, x0: float | None = None,
                  x1: float | None = None) -> dict[str, tuple[float, float]]:  # fmt: skip
    """Draw [x0, x1] (default: the whole view) ``width`` px wide and compare, on ``lane``'s
    row, each class's share of the pixels with its share of the busy time."""
    main = next(iter(tl.layout.select({"name": "nbprof-timeline"})))
    x0 = main.x_range.start if x0 is None else x0
    x1 = main.x_range.end if x1 is None else x1
    out = draw(tl, x0, x1, width=float(width))
    canvas = painted(drawn_in_order(tl, out), float(lane), x0, x1, width, tl.doc.bar)
    pix = pixel_shares(canvas, tl.doc.colors)
    busy = busy_shares(tl, lane, x0, x1)
    keys = list(CLASSES)
    both = {keys[k]: (round(100 * busy.get(k, 0.0), 1), round(100 * pix.get(k, 0.0), 1))
            for k in sorted(set(pix) | set(busy))}  # fmt: skip
    off = {k: v for k, v in both.items() if abs(v[0] - v[1]) > POINTS}
    assert not off, f"{out['mode']} at {width} px: (busy %, pixel %) per class {both}"
    return both


def qwen_like_lane() -> Any:
    """One GPU stream as a decoder's layers run on it: per layer four 26 µs elementwise
    kernels 2 µs apart, a 0.86 µs memset of a GEMM's workspace, a 75 µs Tensor Core GEMM;
    360 layers (45 ms). Zoomed out to a few hundred pixels each kernel is under a pixel."""
    rows = []
    t = 0.0
    for layer in range(360):
        for k in range(4):
            rows.append(("memory", f"elementwise_{k}", t, 26.0))
            t += 28.0
        rows.append(("memset", "Memset (Device)", t, 0.86))
        t += 1.5
        rows.append(("tensor_core", "sm90_xmma_gemm_bf16", t, 75.0))
        t += 77.0 + (layer % 7)
    ev = pd.DataFrame(rows, columns=["cls_key", "name", "ts", "dur"])
    ev["lane"] = 0
    ev["cls"] = ev["cls_key"].map(CLASS_IDS).astype(np.int64)
    for c in ("grid", "block", "occ", "op", "extra"):
        ev[c] = "—"
    ev["bytes"] = np.where(ev["cls_key"] == "memset", 4096.0, np.nan)
    ev["corr"] = -1
    data = pack(ev[list(EVENT_COLUMNS)], [Lane("GPU 0 stream 7", "gpu", ("gpu", 0, 7))], [])
    return timeline.build(None, data=data, idle_gaps=None)


@pytest.mark.parametrize("width", [780, 1300, 1800])
def test_zoomed_out_each_class_paints_its_share_of_the_time(width: int) -> None:
    need_node()
    both = assert_honest(qwen_like_lane(), 0, width)
    assert both["tensor_core"][1] > 20, "the GEMMs are seen"


def test_zoomed_in_part_way_the_shares_still_hold() -> None:
    need_node()
    tl = qwen_like_lane()
    span = tl.data.span
    for frac in (0.2, 0.05, 0.01):
        assert_honest(tl, 0, 1000, span * 0.4, span * (0.4 + frac))


@pytest.mark.corpus
@pytest.mark.parametrize("width", [780, 1300, 1800])
def test_the_qwen_gpu_lane_is_painted_as_its_time_was_spent(corpus: str, width: int) -> None:
    """The H100 Qwen trace at 900 px: memsets are 212 µs of 45.6 ms busy (0.5%), Tensor
    Core GEMMs 36.5%; drawn event by event with an outline, memsets took 37% of the lane."""
    need_node()
    tl = timeline.build(nbprof.load(f"{corpus}/{QWEN}"))
    lane = next(i for i, ln in enumerate(tl.data.lanes) if ln.kind == "gpu")
    both = assert_honest(tl, lane, width)
    assert both["memset"][1] < 2 and both["tensor_core"][1] > 25, both
