// Search (nbprof/views/js/search.mjs).
import assert from "node:assert/strict";
import test from "node:test";
import * as search from "../../nbprof/views/js/search.mjs";

const names = ["sm90_xmma_gemm", "ncclDevKernel_AllReduce", "aten::mm"];

test("substring, case-insensitive", () => {
  assert.deepEqual(Array.from(search.matchSigs(names, "GEMM")), [1, 0, 0]);
  assert.deepEqual(Array.from(search.matchSigs(names, "  mm ")), [1, 0, 1]);
});

test("/regex/ with flags; an invalid or empty query marks none", () => {
  assert.deepEqual(Array.from(search.matchSigs(names, "/nccl|::mm$/")), [0, 1, 1]);
  assert.deepEqual(Array.from(search.matchSigs(names, "/^SM90/")), [1, 0, 0], "case-blind");
  assert.deepEqual(Array.from(search.matchSigs(names, "/(/")), [0, 0, 0]);
  assert.deepEqual(Array.from(search.matchSigs(names, "")), [0, 0, 0]);
});

test("an exact name marks only itself", () => {
  assert.deepEqual(Array.from(search.exactSigs(names, "aten::mm")), [0, 0, 1]);
  assert.deepEqual(Array.from(search.exactSigs(names, "aten::m")), [0, 0, 0]);
});

test("matches are visited in time order, whatever their lane", () => {
  const x = [50, 10, 30, 20];
  const sig = [0, 1, 0, 0];
  assert.deepEqual(search.markedEvents(sig, [1, 0]), [0, 2, 3]);
  assert.deepEqual(search.matchesInTime(x, sig, [1, 0]), [3, 2, 0]);
});

test("the count reads as words, and stepping wraps around", () => {
  assert.equal(search.countText("", 0), "");
  assert.equal(search.countText("x", 0), "no match");
  assert.equal(search.countText("x", 1), "1 match");
  assert.equal(search.countText("x", 12345), "12,345 matches");
  assert.equal(search.cursorText(0, 1200), "1 of 1,200");
  assert.equal(search.stepCursor(-1, 1, 3), 0);
  assert.equal(search.stepCursor(2, 1, 3), 0);
  assert.equal(search.stepCursor(0, -1, 3), 2);
  assert.equal(search.stepCursor(-1, -1, 3), 1);
  assert.equal(search.stepCursor(-1, 1, 0), -1);
});

test("a match keeps the zoom when readable at it, else the view zooms to 50x it", () => {
  // 10 µs in a 1000 µs view: readable (>= 1/200), the width is kept, centred on it.
  assert.deepEqual(search.windowFor(495, 10, 0, 1000, [0, 10000]), [0, 1000]);
  // 1 µs in a 1000 µs view: 50 µs around it.
  assert.deepEqual(search.windowFor(500, 1, 0, 1000, [0, 10000]), [475.5, 525.5]);
});
