// Rows and folded ranks (nbprof/views/js/fold.mjs).
import assert from "node:assert/strict";
import test from "node:test";
import * as fold from "../../nbprof/views/js/fold.mjs";

// Two ranks: rank 0 has a CPU lane and two GPU streams, rank 1 one GPU stream.
const groups = [
  { rank: 0, first: 0, last: 3, folded: [1, 2], open: "▾ rank 0", closed: "▸ rank 0 · 2" },
  { rank: 1, first: 3, last: 4, folded: [3], open: "▾ rank 1", closed: "▸ rank 1 · 1" },
];
const labels = ["cpu", "s7", "s13", "s7"];

test("expanded: a header row per rank, then its lanes; an axis along each header", () => {
  const lay = fold.rowLayout(groups, labels, [false, false], 12);
  assert.deepEqual(lay.rows.map((r) => [r.label, r.kind]), [["▾ rank 0", "header"],
    ["cpu", "lane"], ["s7", "lane"], ["s13", "lane"], ["▾ rank 1", "header"], ["s7", "lane"]]);
  assert.deepEqual(Array.from(lay.laneRow), [1, 2, 3, 5]);
  assert.deepEqual(lay.axes, [-0.5, 3.5]);
  assert.deepEqual(lay.separators, []);
});

test("folded: one row holding the rank's GPU streams; its other lanes are not drawn", () => {
  const lay = fold.rowLayout(groups, labels, [true, false], 12);
  assert.deepEqual(lay.rows.map((r) => r.label), ["▸ rank 0 · 2", "▾ rank 1", "s7"]);
  assert.deepEqual(Array.from(lay.laneRow), [-1, 0, 0, 2]);
  assert.deepEqual(Array.from(lay.merged), [0, 1, 1, 0]);
  assert.deepEqual(lay.rows[0].lanes, [1, 2]);
  const both = fold.rowLayout(groups, labels, [true, true], 12);
  assert.deepEqual(both.separators, [0.5], "a line between two folded ranks");
});

test("a long run of rows gets a ruler row with a time axis", () => {
  const g = [{ rank: 0, first: 0, last: 5, folded: [0], open: "r0", closed: "r0" }];
  const lay = fold.rowLayout(g, ["a", "b", "c", "d", "e"], [false], 2);
  assert.deepEqual(lay.rows.map((r) => r.kind),
    ["header", "lane", "lane", "ruler", "lane", "lane", "ruler", "lane"]);
  assert.deepEqual(lay.axes, [-0.5, 2.5, 5.5]);
});

test("without groups every lane is its own row", () => {
  const lay = fold.rowLayout([], ["a", "b"], [], 12);
  assert.deepEqual(lay.rows.map((r) => r.lanes), [[0], [1]]);
  assert.deepEqual(Array.from(lay.laneRow), [0, 1]);
});

test("fold, unfold and flip one rank or all", () => {
  assert.deepEqual(fold.toggleFold([false, false], 1), [false, true]);
  assert.deepEqual(fold.toggleFold([false, true], 1), [false, false]);
  assert.deepEqual(fold.toggleFold([false, true], -1, true), [true, true]);
  assert.deepEqual(fold.toggleFold([true, true], -1, false), [false, false]);
  assert.deepEqual(fold.toggleFold([true], 5), [true], "no such group: nothing changes");
  const before = [false];
  fold.toggleFold(before, 0);
  assert.deepEqual(before, [false], "a new array; the old one is left alone");
});

test("the y axis labels the labelled rows; the folded ranks read as a list", () => {
  const lay = fold.rowLayout(groups, labels, [true, false], 12);
  assert.deepEqual(fold.yTicks(lay), { ticks: [0, 1, 2],
    labels: [[0, "▸ rank 0 · 2"], [1, "▾ rank 1"], [2, "s7"]] });
  assert.equal(fold.collapsedAttr([true, false, true]), "0,2");
  assert.equal(fold.collapsedAttr([false]), "");
  assert.equal(fold.groupOfRow(lay, 0), 0);
  assert.equal(fold.groupOfRow(lay, 1), 1);
  assert.equal(fold.groupOfRow(lay, 2), -1, "a lane row is not a rank's label");
  assert.equal(fold.groupOfRow(lay, 9), -1);
});

test("the plot is a row height per row, within its limits", () => {
  const p = { plot: { lane_px: 26, min_px: 300, max_px: 2400, pad_px: 90 } };
  assert.equal(fold.plotHeight(2, p), 300);
  assert.equal(fold.plotHeight(40, p), 90 + 40 * 26);
  assert.equal(fold.plotHeight(10000, p), 2400);
});

test("layoutOf reads the document's groups, labels and folds", () => {
  const tdoc = { groups, lane_axis: labels, collapsed: [true, true], axis_every: 12 };
  assert.equal(fold.layoutOf(tdoc).rows.length, 2);
  assert.equal(fold.layoutOf(tdoc, [false, false]).rows.length, 6);
});
