/*
 * The tail of nbprof's load bundle, run right after BokehJS itself: dashboards that
 * rendered before BokehJS was on the page (they wait in globalThis.__nbprof_pending, see
 * embed.mjs) are drawn now.
 */
(function (root) {
  "use strict";
  const pending = root.__nbprof_pending || [];
  root.__nbprof_pending = [];
  for (const run of pending) run();
})(typeof globalThis !== "undefined" ? globalThis : this);
