// The keyboard (nbprof/views/js/keys.mjs): W/S zoom, A/D pan, 0 reset, Escape, /.
import assert from "node:assert/strict";
import test from "node:test";
import { PAN_STEP, ZOOM_STEP, isFormField, keyAction } from "../../nbprof/views/js/keys.mjs";

const full = [0, 1000];
const key = (k, mods = {}) => ({ key: k, ...mods });

test("W zooms in and S out, about the pointer", () => {
  const w = keyAction(key("w"), 0, 1000, 250, full).range;
  assert.deepEqual(w, [250 - 250 * ZOOM_STEP, 250 + 750 * ZOOM_STEP]);
  const s = keyAction(key("S"), 100, 200, 150, full).range;
  assert.ok(Math.abs(s[1] - s[0] - 100 / ZOOM_STEP) < 1e-9 && s[0] < 100 && s[1] > 200);
});

test("without a pointer, W zooms about the middle", () => {
  const [s, e] = keyAction(key("w"), 0, 1000, null, full).range;
  assert.ok(Math.abs((s + e) / 2 - 500) < 1e-9);
});

test("A and D pan by a fifth of the view, within the run", () => {
  assert.deepEqual(keyAction(key("d"), 100, 200, null, full).range,
    [100 + 100 * PAN_STEP, 200 + 100 * PAN_STEP]);
  assert.deepEqual(keyAction(key("a"), 0, 100, null, full).range, [0, 100]);
});

test("0 resets to the whole run; Escape unpins; / goes to the search box", () => {
  const r = keyAction(key("0"), 10, 20, null, full).range;
  assert.deepEqual(r, full);
  assert.notEqual(r, full, "a copy: the caller may not change the limits");
  assert.deepEqual(keyAction(key("Escape"), 0, 1, null, full), { unpin: true });
  assert.deepEqual(keyAction(key("/"), 0, 1, null, full), { search: true });
});

test("other keys, and keys with Ctrl, Cmd or Alt, are left to the page", () => {
  assert.equal(keyAction(key("x"), 0, 1, null, full), null);
  for (const mod of ["ctrlKey", "metaKey", "altKey"]) {
    assert.equal(keyAction(key("w", { [mod]: true }), 0, 1, null, full), null, mod);
  }
});

test("keys typed into form fields are text", () => {
  for (const t of ["INPUT", "TEXTAREA", "SELECT", "BUTTON"]) assert.ok(isFormField(t), t);
  assert.ok(!isFormField("CANVAS") && !isFormField("DIV") && !isFormField(undefined));
});
