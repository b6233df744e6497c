// Values by the names the timeline document gives them (nbprof/views/js/fields.mjs).
import assert from "node:assert/strict";
import test from "node:test";
import * as fields from "../../nbprof/views/js/fields.mjs";
import { model } from "./fixture.mjs";

const m = model();
const value = (name, i, l) => fields.eventValue(name, m.S)(m, i, l);

test("an event's values: its signature's columns, and the derived ones", () => {
  assert.equal(value("name", 1, 1), "sm90_xmma_gemm_bf16");
  assert.equal(value("grid", 1, 1), "264");
  assert.equal(value("kind", 1, 1), "Tensor Core GEMM");
  assert.equal(value("lane", 1, 1), "GPU 0 stream 7");
  assert.equal(value("dur", 1, 1), 10);
  assert.equal(value("partner", 1, 1), "cudaLaunchKernel");
  assert.equal(value("partner_lane", 1, 1), "main: CUDA calls");
  assert.equal(value("partner", 2, 1), undefined, "a copy nothing launched");
});

test("from launch to kernel start, seen from either end", () => {
  assert.equal(value("launch_to_start", 1, 1), 5);
  assert.equal(value("launch_to_start", 0, 0), 5);
  assert.equal(value("launch_to_start", 2, 1), undefined);
});

test("a copy's rate is its size over its duration; none without a size", () => {
  assert.equal(value("rate", 2, 1), 4000, "4 MB in 1 µs");
  assert.equal(value("rate", 1, 1), undefined);
});

test("a name the browser does not know fails loudly, for every kind of value", () => {
  assert.throws(() => fields.eventValue("no_such_value", m.S), /no_such_value/);
  assert.throws(() => fields.binValue("grid"), /grid/);
  assert.throws(() => fields.gapValue("name"), /name/);
  assert.throws(() => fields.eventValue("toString", m.S), /toString/);
});

test("bars and gaps have their own values", () => {
  const a = { busy: [0.5], events: [3], cls: [1], lane: [1] };
  assert.equal(fields.binValue("busy")(m, a, 0), 50);
  assert.equal(fields.binValue("kind")(m, a, 0), "Tensor Core GEMM");
  assert.equal(fields.gapValue("cause_label")(m, 0), "GPU waited for the host");
  assert.equal(fields.gapValue("cpu_work")(m, 0), "aten::item");
  assert.equal(fields.gapValue("lane")(m, 0), "GPU 0 stream 7");
});

test("a filler fills the columns its caller does not compute itself", () => {
  const out = fields.empty(["left", "name", "dur"]);
  const fill = fields.filler(["left", "name", "dur"], ["left"],
    (c) => fields.eventValue(c, m.S));
  fill(out, m, 1, 1);
  assert.deepEqual(out, { left: [], name: ["sm90_xmma_gemm_bf16"], dur: [10] });
});

test("a row's text: values and formats filled; a row missing a value is left out", () => {
  const v = { a: "x", n: 1500, z: 0, gone: undefined, nan: NaN, empty: "" };
  const of = (k) => v[k];
  assert.equal(fields.fillText("{a} in {n:us}", of), "x in 1.5 ms");
  assert.equal(fields.fillText("{z}", of), "0", "zero is a value");
  for (const k of ["gone", "nan", "empty"]) assert.equal(fields.fillText(`{${k}}`, of), null, k);
  assert.throws(() => fields.fillText("{n:furlongs}", of), /furlongs/);
});

test("the details pane says the document's rows for the event's kind", () => {
  assert.deepEqual(fields.paneRows(m, 1), [["class", "Tensor Core GEMM"],
    ["grid × block", "264 × 128"],
    ["launch call", "cudaLaunchKernel on main: CUDA calls, 5 µs before this started"]]);
  assert.deepEqual(fields.paneRows(m, 2), [["size", "4,000,000 bytes"],
    ["rate", "4000.00 GB/s (size ÷ duration)"]]);
  assert.deepEqual(fields.paneRows(m, 0), [["launched", "sm90_xmma_gemm, 5 µs later"]]);
});
