// The mouse wheel over the timeline (nbprof/views/js/wheel.mjs).
import assert from "node:assert/strict";
import test from "node:test";
import * as wheel from "../../nbprof/views/js/wheel.mjs";

test("the wheel scrolls the page until the plot is clicked or Ctrl/⌘ is held", () => {
  const plain = { deltaY: 100 };
  assert.equal(wheel.wheelAction(plain, false), "page");
  assert.equal(wheel.wheelAction(plain, true), "bokeh");
  assert.equal(wheel.wheelAction({ ...plain, ctrlKey: true }, false), "bokeh");
  assert.equal(wheel.wheelAction({ ...plain, metaKey: true }, false), "own");
  assert.deepEqual(wheel.wheelModifiers(false), { ctrl: true });
  assert.deepEqual(wheel.wheelModifiers(true), {});
});

test("a wheel turn zooms out when rolled down, in when rolled up, bounded", () => {
  assert.ok(wheel.wheelFactor({ deltaY: 100 }) > 1);
  assert.ok(wheel.wheelFactor({ deltaY: -100 }) < 1);
  assert.equal(wheel.wheelFactor({ deltaY: 0 }), 1);
  // Firefox reports lines: 3 lines read as 120 px.
  assert.equal(wheel.wheelFactor({ deltaY: 3, deltaMode: 1 }),
    wheel.wheelFactor({ deltaY: 120 }));
  assert.equal(wheel.wheelFactor({ deltaY: -1e6 }), 0.1);
});

test("the bar says what the wheel does in each mode", () => {
  assert.match(wheel.wheelHint(false), /scrolls the page.*Ctrl\/⌘/);
  assert.match(wheel.wheelHint(true), /zooms/);
});
