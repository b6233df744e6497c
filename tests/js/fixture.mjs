// A tiny timeline model, as document.mjs open() makes it, for the unit tests.
//
// Lane 0 "main: CUDA calls": a launch call at 0-2 µs. Lane 1 "GPU 0 stream 7": the kernel
// it launched at 5-15 µs, and a 4 MB copy at 20-21 µs. Class 0 is a runtime launch,
// 1 a Tensor Core kernel, 2 a copy.
const cols = (names) => Object.fromEntries(names.map((n) => [n, []]));
const GEOM = ["left", "right", "bottom", "top"];

export function tdoc(extra = {}) {
  return {
    schema: "nbprof.timeline/1",
    tick: 0.001,
    offsets: [0, 1, 3],
    maxdur: [2, 10],
    lanes: ["main: CUDA calls", "GPU 0 stream 7"],
    lane_axis: ["main: CUDA calls", "GPU 0 stream 7"],
    colors: ["#111111", "#222222", "#333333"],
    labels: ["runtime: launch", "Tensor Core GEMM", "memcpy HtoD"],
    tips: ["runtime", "kernel", "gpu"],
    gap_causes: ["host_wait"],
    gap_labels: ["GPU waited for the host"],
    cpu_work: ["aten::item"],
    cap: 100,
    agg_cap: 40,
    max_bins: 10,
    overview_bins: 4,
    bar: 0.8,
    groups: [],
    collapsed: [],
    axis_every: 12,
    n_axes: 0,
    plot: { lane_px: 26, min_px: 300, max_px: 2400, pad_px: 90 },
    sources: {
      detail: Object.fromEntries(["kernel", "gpu", "runtime", "cpu"].map((k) => [k,
        { name: "d-" + k, columns: [...GEOM, "color", "i", "name", "short", "kind", "dur",
          "lane"] }])),
      aggregate: { name: "agg", columns: [...GEOM, "color", "busy", "events", "kind", "lane"] },
      gap_hover: { name: "gh", columns: [...GEOM, "dur", "cause_label", "cpu_work", "lane"] },
      gap_shading: { host_wait: { name: "gs", columns: GEOM } },
      gap_labels: { name: "gl", columns: ["x", "y", "text"] },
      bar_labels: { name: "bl", columns: ["x", "y", "text"] },
      marks: { name: "mk", columns: GEOM },
      pinned: { name: "pn", columns: GEOM },
      link: { name: "ln", columns: ["x0", "y0", "x1", "y1"] },
      overview: { name: "ov", columns: [...GEOM, "color"] },
      separators: { name: "sp", columns: ["y"] },
    },
    pane: {
      kernel: [["class", "{kind}"], ["grid × block", "{grid} × {block}"],
        ["launch call", "{partner} on {partner_lane}, {launch_to_start:us} before this started"]],
      gpu: [["size", "{extra}"], ["rate", "{rate:gbps} (size ÷ duration)"]],
      runtime: [["launched", "{partner}, {launch_to_start:us} later"]],
      cpu: [],
    },
    models: { figure: "fig", rank_axes: [] },
    ...extra,
  };
}

export function model(extra = {}) {
  return {
    tdoc: tdoc(extra),
    x: Float64Array.from([0, 5, 20]),
    d: Float64Array.from([2, 10, 1]),
    sig: Uint16Array.from([0, 1, 2]),
    link: Int32Array.from([1, 0, -1]),
    S: {
      cls: Uint8Array.from([0, 1, 2]),
      bytes: Float64Array.from([NaN, NaN, 4e6]),
      name: ["cudaLaunchKernel", "sm90_xmma_gemm_bf16", "Memcpy HtoD (Pageable -> Device)"],
      short: ["cudaLaunchKernel", "sm90_xmma_gemm", "Memcpy HtoD"],
      grid: ["—", "264", "—"],
      block: ["—", "128", "—"],
      extra: ["cuda_runtime", "—", "4,000,000 bytes"],
    },
    G: { left: Float64Array.from([15]), right: Float64Array.from([20]),
      dur: Float64Array.from([5]), li: Uint16Array.from([1]), cause: Uint8Array.from([0]),
      cpu: Uint16Array.from([0]) },
  };
}

export { cols };
