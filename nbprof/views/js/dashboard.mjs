/*
 * The dashboard's script (bundled inline into every dashboard by nbprof/views/assets.py):
 * publishes the front end on globalThis.nbprof, then draws every dashboard on the page.
 *
 * globalThis.nbprof.format is what the axis tick callbacks (ticks.js) format with;
 * .timeline and .embed are for the tests and whoever inspects a page.
 */
import { alignFrames, viewsOf } from "./bokeh.mjs";
import * as embed from "./embed.mjs";
import * as format from "./format.mjs";
import { attach } from "./timeline.mjs";

const nbprof = (globalThis.nbprof = globalThis.nbprof || {});
nbprof.format = format;
nbprof.timeline = { attach, viewsOf, alignFrames };
nbprof.embed = embed;
embed.embedAll(globalThis.document);
