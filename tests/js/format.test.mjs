// How times and labels read (nbprof/views/js/format.mjs).
import assert from "node:assert/strict";
import test from "node:test";
import { fitLabel, fmtCount, fmtTime } from "../../nbprof/views/js/format.mjs";

test("times read in the unit a person uses", () => {
  assert.equal(fmtTime(1500000), "1.5 s");
  assert.equal(fmtTime(2500), "2.5 ms");
  assert.equal(fmtTime(12.25), "12.25 µs");
  assert.equal(fmtTime(0.25), "250 ns");
  assert.equal(fmtTime(0), "0 µs");
  assert.equal(fmtTime(-300), "-300 µs");
});

test("a bar label never runs past its bar", () => {
  assert.equal(fitLabel("ncclDevKernel_AllReduce", 200, 6.5), "ncclDevKernel_AllReduce");
  const t = fitLabel("ncclDevKernel_AllReduce", 80, 6.5);
  assert.ok(t.endsWith("…") && t.length * 6.5 <= 80, t);
  assert.equal(fitLabel("anything", 20, 6.5), "");
});

test("counts group their thousands", () => {
  assert.equal(fmtCount(1234567), "1,234,567");
});
