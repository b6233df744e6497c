// Sortable tables (nbprof/views/js/tables.mjs).
import assert from "node:assert/strict";
import test from "node:test";
import { cellValue, compare } from "../../nbprof/views/js/tables.mjs";

test("table cells sort by their data-v numbers, else by text", () => {
  const cell = (v, t) => ({ getAttribute: () => v, textContent: t });
  assert.equal(cellValue(cell("12.5", "12.5 %")), 12.5);
  assert.equal(cellValue(cell(null, " Name ")), "name");
  assert.equal(cellValue(cell("", "7")), "7", "an empty data-v falls back to the text");
  assert.ok(compare(2, 10) < 0 && compare("b", "a") > 0 && compare("a", "a") === 0);
});
