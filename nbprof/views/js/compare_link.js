// Bokeh CustomJS body, run when one stacked timeline's x range (cb_obj) changes: moves the
// other timeline's range (dst) to the same window of the shared time scale.
//
// Each timeline keeps its own coordinates (µs since its first event); a time on the shared
// scale (µs since the run's first step or first GPU event) is `t + shift` in dst's
// coordinates, with `shift` = dst's origin minus cb_obj's origin, both in their own
// coordinates. A range already where it should be is left alone, so the pair of
// callbacks that link two ranges never bounce: the second finds dst already there.
const start = cb_obj.start + shift;
const end = cb_obj.end + shift;
const tol = 1e-9 * Math.max(1, Math.abs(end - start));
if (Math.abs(dst.start - start) > tol || Math.abs(dst.end - end) > tol) {
  dst.setv({start: start, end: end});
}
