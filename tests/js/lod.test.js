// Unit tests of the timeline's browser code, run by `node --test tests/js/` (Node 18+, no
// npm install) and by tests/test_views_js.py under pytest.
"use strict";
const test = require("node:test");
const assert = require("node:assert/strict");
const path = require("node:path");
const js = path.join(__dirname, "..", "..", "nbprof", "views", "js");
const lod = require(path.join(js, "lod.js"));
const timeline = require(path.join(js, "timeline.js"));
const embed = require(path.join(js, "embed.js"));

// Two lanes: lane 0 holds events at 0-10, 20-25, 30-100 µs; lane 1 one at 5-6 µs.
// Tick 0.5 µs, start deltas per lane.
const tick = 0.5;
const offsets = [0, 3, 4];
const dx = Uint32Array.from([0, 40, 20, 10]);
const dd = Uint32Array.from([20, 10, 140, 2]);

test("decode turns delta ticks into µs per lane", () => {
  const { x, d } = lod.decode(dx, dd, offsets, tick);
  assert.deepEqual(Array.from(x), [0, 20, 30, 5]);
  assert.deepEqual(Array.from(d), [10, 5, 70, 1]);
});

test("links decode from per-lane differences; NO_LINK leaves -1", () => {
  const dl = Int32Array.from([3, lod.NO_LINK, -3, 0]);
  assert.deepEqual(Array.from(lod.decodeLinks(dl, offsets)), [3, -1, 0, 0]);
});

test("bounds and exact find every event overlapping the window, and only those", () => {
  const { x, d } = lod.decode(dx, dd, offsets, tick);
  const maxdur = [70, 1];
  const b = lod.bounds(x, offsets, maxdur, 22, 26);
  const ex = lod.exact(x, d, b, 22);
  // 20-25 overlaps; 30-100 starts after 26; 0-10 ends before 22; lane 1's 5-6 is out.
  assert.deepEqual(ex.idx, [1]);
  assert.deepEqual(ex.lanes, [0]);
  const all = lod.exact(x, d, lod.bounds(x, offsets, maxdur, 50, 60), 50);
  assert.deepEqual(all.idx, [2], "a long event that started before the window");
});

test("aggregate: busy fraction per bin is the overlap divided by the bin width", () => {
  const { x, d } = lod.decode(dx, dd, offsets, tick);
  const sig = Uint16Array.from([0, 1, 1, 0]);
  const sigCls = Uint8Array.from([2, 5]);
  const b = lod.bounds(x, offsets, [70, 1], 0, 100);
  const a = lod.aggregate(x, d, sig, sigCls, 8, b, 0, 100, 4, Uint8Array.from([0, 1]));
  const lane0 = a.lane.map((l, j) => j).filter((j) => a.lane[j] === 0);
  // Bins of 25 µs: [0,25): 10 + 5 busy; [25,50): 20; [50,75): 25; [75,100): 25.
  assert.deepEqual(lane0.map((j) => a.busy[j]), [15 / 25, 20 / 25, 1, 1]);
  assert.deepEqual(lane0.map((j) => a.events[j]), [2, 1, 0, 0]);
  // Dominant class by time: bin 0 has 10 µs of class 2 and 5 of class 5.
  assert.deepEqual(lane0.map((j) => a.cls[j]), [2, 5, 5, 5]);
  assert.deepEqual(lane0.map((j) => a.marked[j]), [1, 1, 0, 0]);
});

test("binCount keeps lanes x bins under the cap", () => {
  assert.equal(lod.binCount(30, 24000, 800), 800);
  assert.equal(lod.binCount(300, 24000, 800), 80);
  assert.equal(lod.binCount(0, 10, 800), 10);
});

test("clipGaps leaves only the parts of a gap where nothing is drawn on its lane", () => {
  const pieces = lod.clipGaps([10, 100], [50, 110], [3, 3], [0, 20, 25, 40], [12, 30, 28, 60],
    [3, 3, 3, 2]);
  assert.deepEqual(pieces.map((p) => [p.gap, p.left, p.right]),
    [[0, 12, 20], [0, 30, 50], [1, 100, 110]]);
});

test("matchSigs: substring, case-insensitive; /regex/; nothing for empty or bad input", () => {
  const names = ["sm90_xmma_gemm", "ncclDevKernel_AllReduce", "aten::mm"];
  assert.deepEqual(Array.from(lod.matchSigs(names, "GEMM")), [1, 0, 0]);
  assert.deepEqual(Array.from(lod.matchSigs(names, "/nccl|::mm$/")), [0, 1, 1]);
  assert.deepEqual(Array.from(lod.matchSigs(names, "")), [0, 0, 0]);
  assert.deepEqual(Array.from(lod.matchSigs(names, "/(/")), [0, 0, 0]);
});

test("keyboard zoom keeps the anchor in place and stays within the limits", () => {
  const [s, e] = lod.zoomRange(0, 100, 25, 0.5, [0, 100], 1e-3);
  assert.deepEqual([s, e], [12.5, 62.5]);
  assert.deepEqual(lod.zoomRange(0, 100, 50, 4, [0, 100], 1e-3), [0, 100]);
  assert.deepEqual(lod.zoomRange(50, 50.001, 50, 0.1, [0, 100], 1e-3), [50, 50.001]);
  assert.deepEqual(lod.panRange(10, 30, 0.5, [0, 100]), [20, 40]);
  assert.deepEqual(lod.panRange(0, 30, -0.5, [0, 100]), [0, 30]);
  assert.deepEqual(lod.panRange(80, 100, 0.5, [0, 100]), [80, 100]);
});

test("times read in the unit a person uses", () => {
  assert.equal(lod.fmtTime(1500000), "1.5 s");
  assert.equal(lod.fmtTime(2500), "2.5 ms");
  assert.equal(lod.fmtTime(12.25), "12.25 µs");
  assert.equal(lod.fmtTime(0.25), "250 ns");
  assert.equal(lod.fmtTime(0), "0 µs");
});

test("a bar label never runs past its bar", () => {
  assert.equal(lod.fitLabel("ncclDevKernel_AllReduce", 200, 6.5), "ncclDevKernel_AllReduce");
  const t = lod.fitLabel("ncclDevKernel_AllReduce", 80, 6.5);
  assert.ok(t.endsWith("…") && t.length * 6.5 <= 80, t);
  assert.equal(lod.fitLabel("anything", 20, 6.5), "");
});

test("the details pane says what launched a kernel and how long before", () => {
  const rows = new Map(timeline.detailRows({
    kind: "Tensor Core GEMM", tip: "kernel", dur: 150, start: 60, lane: "GPU 0 stream 7",
    grid: "264", block: "128", occ: "50 %", op: "aten::mm",
    partner: { short: "cudaLaunchKernel", lane: "main thread: CUDA calls", start: 52 },
  }));
  assert.equal(rows.get("grid × block"), "264 × 128");
  assert.equal(rows.get("launched by (CPU op)"), "aten::mm");
  assert.equal(rows.get("launch call"), "cudaLaunchKernel on main thread: CUDA calls, 8 µs before this started");
  const copy = new Map(timeline.detailRows({
    kind: "memcpy HtoD", tip: "gpu", dur: 1000, start: 0, lane: "GPU 0 stream 7",
    op: "aten::copy_", extra: "4,000,000 bytes", bytes: 4e6,
  }));
  assert.equal(copy.get("rate"), "4.00 GB/s (size ÷ duration)");
  assert.ok(!copy.has("grid × block"));
});

test("gaps decode from delta start ticks and length ticks", () => {
  const g = timeline.decodeGaps({ dx: [20, 10], dd: [4, 2], li: [1, 2], cause: [0, 1],
    cpu: [0, 0] }, 0.5);
  assert.deepEqual(Array.from(g.left), [10, 15]);
  assert.deepEqual(Array.from(g.right), [12, 16]);
});

test("table cells sort by their data-v numbers, else by text", () => {
  const cell = (v, t) => ({ getAttribute: () => v, textContent: t });
  assert.equal(embed.cellValue(cell("12.5", "12.5 %")), 12.5);
  assert.equal(embed.cellValue(cell(null, " Name ")), "name");
  assert.ok(embed.compare(2, 10) < 0 && embed.compare("b", "a") > 0);
});
