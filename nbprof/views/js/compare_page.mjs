/*
 * The comparison's script, bundled after the dashboard's (nbprof/views/compare.py): links
 * the timelines of every comparison on the page.
 */
import * as compare from "./compare.mjs";

const nbprof = (globalThis.nbprof = globalThis.nbprof || {});
nbprof.compare = compare;
compare.linkAll(globalThis.document);
