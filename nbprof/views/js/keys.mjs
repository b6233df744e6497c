/*
 * nbprof timeline: the keyboard. W/S zoom and A/D pan as in Perfetto and
 * chrome://tracing, 0 resets, Escape unpins, / goes to the search box. Pure.
 */
import { MIN_INTERVAL, panRange, zoomRange } from "./range.mjs";

/** Zoom factor per W/S press and pan fraction per A/D press. */
export const ZOOM_STEP = 0.6;
export const PAN_STEP = 0.2;

/** Whether a key pressed in an element with this tag name is text, not a shortcut. */
export function isFormField(tagName) {
  return /^(INPUT|TEXTAREA|SELECT|BUTTON)$/.test(tagName || "");
}

/**
 * What a key press does to a view [start, end] within `full`: `{range}` (the new
 * window), `{unpin: true}`, `{search: true}`, or null (not a timeline key: let the page
 * have it). `anchor` is the time under the pointer, where W/S zoom about (else the
 * middle of the view). Keys with Ctrl, Cmd or Alt are the browser's and the notebook's.
 */
export function keyAction(e, start, end, anchor, full) {
  if (e.ctrlKey || e.metaKey || e.altKey) return null;
  const at = anchor === null || anchor === undefined ? (start + end) / 2 : anchor;
  switch ((e.key || "").toLowerCase()) {
    case "w":
      return { range: zoomRange(start, end, at, ZOOM_STEP, full, MIN_INTERVAL) };
    case "s":
      return { range: zoomRange(start, end, at, 1 / ZOOM_STEP, full, MIN_INTERVAL) };
    case "a":
      return { range: panRange(start, end, -PAN_STEP, full) };
    case "d":
      return { range: panRange(start, end, PAN_STEP, full) };
    case "0":
      return { range: full.slice() };
    case "escape":
      return { unpin: true };
    case "/":
      return { search: true };
    default:
      return null;
  }
}
