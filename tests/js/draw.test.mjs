// What is drawn for a window (nbprof/views/js/draw.mjs), on the fixture.
import assert from "node:assert/strict";
import test from "node:test";
import { draw, gapShading, overview } from "../../nbprof/views/js/draw.mjs";
import { layoutOf } from "../../nbprof/views/js/fold.mjs";
import { model } from "./fixture.mjs";

const m = model();
const lay = layoutOf(m.tdoc);

test("few events in view: each drawn exactly, in its hover kind's source", () => {
  const out = draw(m, 0, 30, 300, null, lay);
  assert.equal(out.mode, "exact");
  assert.deepEqual(out.detail.kernel.name, ["sm90_xmma_gemm_bf16"]);
  assert.deepEqual(out.detail.runtime.lane, ["main: CUDA calls"]);
  assert.deepEqual(out.detail.gpu.kind, ["memcpy HtoD"]);
  assert.deepEqual(out.detail.kernel.color, ["#222222"]);
  assert.deepEqual([out.detail.kernel.bottom[0], out.detail.kernel.top[0]], [0.6, 1.4]);
  assert.equal(out.agg.left.length, 0);
  for (const [k, cols] of Object.entries(out.detail)) {
    assert.deepEqual(Object.keys(cols), m.tdoc.sources.detail[k].columns, k);
  }
});

test("more than cap events in view: aggregate bars instead", () => {
  const out = draw(model({ cap: 1 }), 0, 30, 300, null, lay);
  assert.equal(out.mode, "aggregate");
  assert.equal(out.detail.kernel.left.length, 0);
  assert.ok(out.agg.left.length > 0);
  assert.deepEqual(Object.keys(out.agg), m.tdoc.sources.aggregate.columns);
});

test("search marks outline the matching events", () => {
  const out = draw(m, 0, 30, 300, Uint8Array.from([0, 1, 0]), lay);
  assert.deepEqual(out.marks.left, [5]);
});

test("a gap answers only where nothing is drawn, and is labelled when wide enough", () => {
  const out = draw(m, 0, 30, 3000, null, lay);
  assert.deepEqual([out.gapHover.left, out.gapHover.right], [[15], [20]]);
  assert.deepEqual(out.gapHover.cpu_work, ["aten::item"]);
  assert.deepEqual(out.gapLabels.text, ["GPU waited for the host"]);
  assert.deepEqual(draw(m, 0, 30, 30, null, lay).gapLabels.text, [], "3 px: no label");
});

test("bars wide enough get their short name as a label", () => {
  const out = draw(m, 0, 30, 3000, null, lay);
  assert.ok(out.barLabels.text.includes("sm90_xmma_gemm"));
  assert.deepEqual(draw(m, 0, 30, 60, null, lay).barLabels.text, []);
});

test("gap shading and the overview strip", () => {
  assert.deepEqual(gapShading(m, lay).host_wait.left, [15]);
  const ov = overview(m, [0, 24]);
  assert.ok(ov.left.length > 0 && ov.color.every((c) => c.startsWith("#")));
});

test("an event narrower than EXACT_MIN_PX is summed into a one-pixel bin, not drawn", () => {
  // 1 px per µs: the 1 µs copy, right after the kernel, is under EXACT_MIN_PX; the 10 µs
  // kernel is not.
  const near = model();
  near.x[2] = 16;
  const out = draw(near, 0, 30, 30, null, lay);
  assert.equal(out.mode, "exact");
  assert.deepEqual(out.detail.gpu.left, []);
  assert.deepEqual(out.detail.kernel.left, [5]);
  assert.deepEqual([out.agg.left, out.agg.right, out.agg.color], [[16], [17], ["#333333"]]);
  assert.deepEqual(out.agg.kind, ["memcpy HtoD"]);
  assert.ok(Math.abs(out.agg.top[0] - out.agg.bottom[0] - 0.8) < 1e-9, "busy all its pixel");
});

test("a bin is as tall as its share of busy time: no minimum height", () => {
  // 10 bins of 300 µs: lane 1 is busy 11 µs (kernel + copy) of its first bin, 3.7%.
  const out = draw(model({ cap: 1 }), 0, 3000, 300, null, lay);
  const k = out.agg.lane.indexOf("GPU 0 stream 7");
  assert.ok(k >= 0);
  const h = out.agg.top[k] - out.agg.bottom[k];
  assert.ok(Math.abs(h - 0.8 * 11 / 300) < 1e-9, `height ${h}`);
  assert.equal(out.agg.kind[k], "Tensor Core GEMM", "coloured by what took most of its time");
});

test("a narrow event alone in its pixels is drawn as itself, a pixel wide", () => {
  // 0.1 px per µs: the 2 µs launch is alone on its lane, the copy 5 µs from the kernel.
  const out = draw(m, 0, 300, 30, null, lay);
  assert.deepEqual(out.detail.runtime.left, [0]);
  assert.ok(Math.abs(out.detail.runtime.right[0] - 10) < 1e-9, "widened to one pixel");
  assert.deepEqual(out.detail.kernel.left, [], "the kernel has the copy beside it");
  assert.deepEqual(out.agg.kind, ["Tensor Core GEMM", "Tensor Core GEMM", "memcpy HtoD"]);
});
