"""The rows of a timeline: one per lane, or, with several ranks, lanes grouped by rank and
each rank folded to one row or not; and the plot's height for them.

The browser lays the rows out again on every fold (js/fold.mjs ``rowLayout``, the same
rules); Python lays out the first ones, so the figure starts at its final height and with
its axes in place. tests/test_views_js.py checks that both give the same rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from nbprof.views.timeline.store import Lane

#: Pixels per lane, and the plot's height limits: a few lanes still get a plot tall enough
#: to read (not a stripe), many lanes scroll with the page instead of shrinking.
LANE_PX = 26
MIN_PLOT_PX = 300
MAX_PLOT_PX = 2400
#: Pixels of a timeline that are not rows (toolbar, axes, borders).
PAD_PX = 90
#: On a rank-grouped timeline, a time axis at least every this many rows (the headers of
#: expanded ranks carry one; a long run without gets a ruler row): with LANE_PX rows, one
#: is on screen wherever a tall timeline is scrolled to.
AXIS_EVERY = 12
#: Time axes a rank-grouped timeline holds at most (the browser moves them as ranks fold
#: and unfold; each axis costs a little on every redraw).
MAX_AXES = 64
#: Ranks start folded when, all expanded, their rows would not fit the tallest plot at
#: full row height (then they would shrink below readable).
FOLD_ROWS = (MAX_PLOT_PX - PAD_PX) // LANE_PX


@dataclass(frozen=True)
class PlotSize:
    """The plot's height rule (:func:`plot_height`; js/fold.mjs plotHeight)."""

    lane_px: int = LANE_PX
    min_px: int = MIN_PLOT_PX
    max_px: int = MAX_PLOT_PX
    pad_px: int = PAD_PX


def plot_height(n_rows: int, size: PlotSize = PlotSize()) -> int:
    """Timeline height in px: ``lane_px`` per row between ``min_px`` and ``max_px``."""
    return int(min(max(size.pad_px + size.lane_px * n_rows, size.min_px), size.max_px))


@dataclass(frozen=True)
class RankGroup:
    """The consecutive lanes [first, last) of one rank, the lanes its row shows when folded
    (its GPU streams: what a rank is read by at a glance), and its row's label expanded
    (``open``) and folded (``closed``)."""

    rank: int
    first: int
    last: int
    folded: list[int]
    open: str
    closed: str


@dataclass
class RowLayout:
    """Rows of a timeline and the row of each lane."""

    #: (label, kind, group) per row; kind "lane", "header", "rank" (folded) or "ruler".
    rows: list[tuple[str, str, int]]
    #: The row each lane is drawn on (-1: a folded rank's lane its row does not show).
    lane_row: list[int]
    #: y of each time axis (the top edge of its row), y of each line between ranks.
    axes: list[float]
    separators: list[float]


def rank_groups(lanes: list[Lane]) -> list[RankGroup]:
    """One group per rank when lanes of more than one rank are drawn, else none."""
    if len({ln.rank for ln in lanes}) < 2:
        return []
    spans: list[list[int]] = []  # [rank, first, last]
    for i, ln in enumerate(lanes):
        if spans and spans[-1][0] == ln.rank and spans[-1][2] == i:
            spans[-1][2] = i + 1
        else:
            spans.append([ln.rank, i, i + 1])
    out = []
    for rank, first, last in spans:
        gpu = [i for i in range(first, last) if lanes[i].kind == "gpu"]
        folded = gpu or list(range(first, last))
        n = len(folded)
        what = ("GPU stream" if gpu else "lane") + ("s" if n != 1 else "")
        out.append(
            RankGroup(rank, first, last, folded, f"▾ rank {rank}", f"▸ rank {rank} · {n} {what}")
        )
    return out


def row_layout(
    groups: list[RankGroup], lane_labels: list[str], collapsed: list[bool], every: int
) -> RowLayout:
    """The rows of a timeline whose ranks ``collapsed`` are folded.

    An expanded rank starts with a header row (its label, and a time axis along its top
    edge, which is also the line between ranks); runs of more than ``every`` rows without
    an axis get an unlabelled ruler row with one. A folded rank is one row holding its
    ``folded`` lanes; its other lanes are not drawn. Without groups every lane is a row.
    """
    if not groups:
        n = len(lane_labels)
        return RowLayout([(lb, "lane", -1) for lb in lane_labels], list(range(n)), [], [])
    gap = max(1, every)
    rows: list[tuple[str, str, int]] = []
    lane_row = [0] * len(lane_labels)
    axes: list[float] = []
    seps: list[float] = []
    since = 0  # rows since the last time axis (the plot's own top axis to begin with)

    def axis_row(label: str, kind: str, group: int) -> None:
        nonlocal since
        axes.append(len(rows) - 0.5)
        rows.append((label, kind, group))
        since = 0

    for gi, g in enumerate(groups):
        boundary = len(rows) - 0.5
        if collapsed[gi]:
            if since >= gap:
                axis_row("", "ruler", -1)
            elif gi > 0:
                seps.append(boundary)
            for lane in range(g.first, g.last):
                lane_row[lane] = -1
            for lane in g.folded:
                lane_row[lane] = len(rows)
            rows.append((g.closed, "rank", gi))
            since += 1
            continue
        axis_row(g.open, "header", gi)
        for lane in range(g.first, g.last):
            if since >= gap:
                axis_row("", "ruler", -1)
            lane_row[lane] = len(rows)
            rows.append((lane_labels[lane], "lane", gi))
            since += 1
    return RowLayout(rows, lane_row, axes, seps)


def axis_labels(lanes: list[Lane], grouped: bool) -> list[str]:
    """A lane's label on the y axis: without its rank when a rank header says it."""
    if not grouped:
        return [ln.label for ln in lanes]
    return [ln.label.removeprefix(f"r{ln.rank} ") for ln in lanes]


def axis_pool(groups: list[RankGroup], n_lanes: int) -> int:
    """Time axes any layout of these groups can need: a header per rank, a ruler per
    AXIS_EVERY rows (the expanded layout has the most rows)."""
    if not groups:
        return 0
    rows = len(groups) + n_lanes
    return min(MAX_AXES, len(groups) + -(-rows // AXIS_EVERY) + 1)


def first_folds(groups: list[RankGroup], lane_labels: list[str]) -> list[bool]:
    """Which ranks start folded: all of them when, expanded, their rows would not fit."""
    open_rows = len(row_layout(groups, lane_labels, [False] * len(groups), AXIS_EVERY).rows)
    return [open_rows > FOLD_ROWS] * len(groups)
