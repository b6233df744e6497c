/*
 * nbprof dashboard: the panel's tables sort by a click on a header (.nbp-sortable).
 */

/** Numeric value of a table cell for sorting: its data-v, else its text. */
export function cellValue(td) {
  const v = td.getAttribute("data-v");
  if (v !== null && v !== "" && !isNaN(Number(v))) return Number(v);
  return (td.textContent || "").trim().toLowerCase();
}

/** Order of two cell values: numbers by value, text alphabetically. */
export function compare(a, b) {
  if (typeof a === "number" && typeof b === "number") return a - b;
  return String(a) < String(b) ? -1 : String(a) > String(b) ? 1 : 0;
}

/** Click a header of a .nbp-sortable table to sort by it; again to reverse. */
export function sortable(table) {
  if (table._nbpSortable) return;
  table._nbpSortable = true;
  const heads = [...table.querySelectorAll("thead th")];
  heads.forEach((th, col) => {
    th.tabIndex = 0;
    th.setAttribute("role", "button");
    const go = () => {
      const body = table.tBodies[0];
      const dir = th.getAttribute("aria-sort") === "descending" ? 1 : -1;
      const rows = [...body.rows];
      rows.sort((r1, r2) => dir * compare(cellValue(r1.cells[col]), cellValue(r2.cells[col])));
      for (const h of heads) h.removeAttribute("aria-sort");
      th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
      body.append(...rows);
    };
    th.addEventListener("click", go);
    th.addEventListener("keydown", (e) => {
      if (e.key === "Enter" || e.key === " ") {
        e.preventDefault();
        e.stopPropagation();
        go();
      }
    });
  });
}
