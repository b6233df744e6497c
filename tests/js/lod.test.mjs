// Level of detail (nbprof/views/js/lod.mjs), run by `node --test tests/js/` and by
// tests/test_views_js.py under pytest.
import assert from "node:assert/strict";
import test from "node:test";
import * as lod from "../../nbprof/views/js/lod.mjs";

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

test("laneOf finds the lane of an event index", () => {
  assert.deepEqual([0, 1, 2, 3].map((i) => lod.laneOf(offsets, i)), [0, 0, 0, 1]);
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

test("gaps decode from delta start ticks and length ticks", () => {
  const g = lod.decodeGaps({ dx: [20, 10], dd: [4, 2], li: [1, 2], cause: [0, 1],
    cpu: [0, 0] }, 0.5);
  assert.deepEqual(Array.from(g.left), [10, 15]);
  assert.deepEqual(Array.from(g.right), [12, 16]);
  assert.deepEqual(Array.from(g.dur), [2, 1]);
});
