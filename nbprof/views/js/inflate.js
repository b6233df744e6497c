/*
 * Runs a script that travels deflated in base64 (nbprof/views/assets.py deflated: nbprof's
 * own front end in every output, BokehJS in the load bundle): a third of the bytes that a
 * saved notebook would otherwise keep. Called with the base64 text; the script runs as an
 * inline <script> (as if it had been on the page), once the browser has inflated it.
 * Without DecompressionStream nothing can run: the timelines on the page say why.
 */
(function (b64) {
  "use strict";
  const NO_INFLATE = "This browser cannot unpack nbprof's timeline: it needs " +
    "DecompressionStream (Chrome 80, Firefox 113, Safari 16.4 or newer).";
  if (typeof DecompressionStream !== "function") {
    for (const t of document.querySelectorAll(".nbprof .nbp-timeline")) {
      if (t.querySelector(".nbp-needs-bokeh")) continue;
      const note = document.createElement("div");
      note.className = "nbp-needs-bokeh";
      note.textContent = NO_INFLATE;
      t.prepend(note);
    }
    return;
  }
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
  new Response(stream).text().then((code) => {
    const s = document.createElement("script");
    s.textContent = code;
    (document.head || document.documentElement).appendChild(s);
    s.remove();
  });
})
