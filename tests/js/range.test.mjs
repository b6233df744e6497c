// Moving the window (nbprof/views/js/range.mjs).
import assert from "node:assert/strict";
import test from "node:test";
import { around, clampRange, panRange, zoomRange } from "../../nbprof/views/js/range.mjs";

test("zoom keeps the anchor in place and stays within the limits", () => {
  assert.deepEqual(zoomRange(0, 100, 25, 0.5, [0, 100], 1e-3), [12.5, 62.5]);
  assert.deepEqual(zoomRange(0, 100, 50, 4, [0, 100], 1e-3), [0, 100]);
  assert.deepEqual(zoomRange(50, 50.001, 50, 0.1, [0, 100], 1e-3), [50, 50.001]);
});

test("pan moves by a fraction of the width and stops at the ends", () => {
  assert.deepEqual(panRange(10, 30, 0.5, [0, 100]), [20, 40]);
  assert.deepEqual(panRange(0, 30, -0.5, [0, 100]), [0, 30]);
  assert.deepEqual(panRange(80, 100, 0.5, [0, 100]), [80, 100]);
});

test("clamp keeps the width where it fits", () => {
  assert.deepEqual(clampRange(-5, 5, [0, 100]), [0, 10]);
  assert.deepEqual(clampRange(-5, 200, [0, 100]), [0, 100]);
  assert.deepEqual(clampRange(-5, 5, null), [-5, 5]);
});

test("around centres a window three times as wide", () => {
  assert.deepEqual(around(40, 50, [0, 100]), [30, 60]);
  assert.deepEqual(around(0, 10, [0, 100]), [0, 30]);
});
