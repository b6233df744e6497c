// Pinning an event (nbprof/views/js/pin.mjs) on the fixture's launch, kernel and copy.
import assert from "node:assert/strict";
import test from "node:test";
import { layoutOf } from "../../nbprof/views/js/fold.mjs";
import * as pin from "../../nbprof/views/js/pin.mjs";
import { model } from "./fixture.mjs";

const m = model();
const lay = layoutOf(m.tdoc);

test("a click hits the event under it, else the nearest within the tolerance", () => {
  assert.equal(pin.hit(m, lay, 10, 1, 0.5), 1, "inside the kernel");
  assert.equal(pin.hit(m, lay, 16, 1, 0.5), -1, "1 µs after it, tolerance 0.5");
  assert.equal(pin.hit(m, lay, 16, 1, 2), 1, "within 2 µs");
  assert.equal(pin.hit(m, lay, 1, 0, 0), 0, "the launch call on row 0");
  assert.equal(pin.hit(m, lay, 1, 7, 5), -1, "no such row");
});

test("of two events under the pointer the shorter wins (the one drawn on top)", () => {
  const m2 = model();
  m2.x = Float64Array.from([0, 5, 6]);
  m2.d = Float64Array.from([2, 10, 1]);
  assert.equal(pin.hit(m2, lay, 6.5, 1, 0), 2);
});

test("a pinned kernel is outlined with its launch, linked from the call to the kernel", () => {
  const s = pin.pinShapes(m, lay, 1);
  assert.deepEqual(s.pinned.left, [5, 0]);
  assert.deepEqual(s.pinned.bottom, [0.5, -0.5]);
  assert.deepEqual(s.link, { x0: [0], y0: [0], x1: [5], y1: [1] });
  // Pinning the launch draws the same line: from the call to its kernel.
  assert.deepEqual(pin.pinShapes(m, lay, 0).link, s.link);
  const copy = pin.pinShapes(m, lay, 2);
  assert.deepEqual(copy.pinned.left, [20]);
  assert.deepEqual(copy.link.x0, [], "no launch call: no line");
  assert.deepEqual(pin.pinShapes(m, lay, -1).pinned.left, [], "unpinned");
});

test("zooming to a pinned event shows its partner too", () => {
  assert.deepEqual(pin.windowOf(m, 1, [0, 100]), [0, 45], "[-15, 30] kept inside the run");
  assert.deepEqual(pin.windowOf(m, 2, [0, 100]), [19, 22]);
});

test("an event's info holds its signature's values and the derived ones", () => {
  const e = pin.eventInfo(m, lay, 1);
  assert.equal(e.short, "sm90_xmma_gemm");
  assert.equal(e.grid, "264");
  assert.equal(e.kind, "Tensor Core GEMM");
  assert.equal(e.tip, "kernel");
  assert.equal(e.lane, "GPU 0 stream 7");
  assert.deepEqual([e.start, e.end, e.dur, e.row, e.li], [5, 15, 10, 1, 1]);
});
