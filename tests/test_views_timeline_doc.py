"""The timeline document: the one contract between nbprof/views/timeline and its browser
code (nbprof/views/js). These tests fail when the two disagree: when the browser reads a
field the document does not declare, leaves a declared one unread, fills a source with
other columns than the Bokeh document declares, or names a value it cannot compute.
"""

from __future__ import annotations

import dataclasses
import json
import re
import types
import typing
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from js_draw import draw, node_eval, source
from views_data import small_profile

import nbprof
from nbprof.views import timeline
from nbprof.views.timeline import document, fields
from nbprof.views.timeline.document import Column, TimelineDoc
from tests.jobs import write_job

JS = Path(timeline.__file__).resolve().parents[1] / "js"

#: Every chain of fields the browser reads from the document: tdoc.sources.marks.columns
_CHAIN = re.compile(r"\btdoc((?:\.[A-Za-z_]\w*)+)")


def _reads() -> set[tuple[str, ...]]:
    out = set()
    for path in JS.glob("*.mjs"):
        for m in _CHAIN.finditer(path.read_text(encoding="utf-8")):
            out.add(tuple(m.group(1).lstrip(".").split(".")))
    return out


def _walk(cls: type, chain: tuple[str, ...], used: dict[type, set[str]]) -> str | None:
    """Follow ``chain`` through the fields of dataclass ``cls``: None when every step is
    a declared field, else the first step that is not (``used`` collects the fields)."""
    t: Any = cls
    for i, step in enumerate(chain):
        origin = typing.get_origin(t)
        if dataclasses.is_dataclass(t):
            hints = typing.get_type_hints(t)
            if step not in hints:
                return ".".join(chain[: i + 1])
            used.setdefault(t, set()).add(step)
            t = hints[step]
        elif origin is dict:
            t = typing.get_args(t)[1]  # a key: any name, then its value
        else:
            return None  # a list's or a string's own properties (length, map)
    return None


def test_the_browser_reads_exactly_the_fields_the_document_declares() -> None:
    used: dict[type, set[str]] = {}
    reads = _reads()
    assert len(reads) > 30, "the scan found the browser's reads"
    unknown = sorted(bad for chain in reads if (bad := _walk(TimelineDoc, chain, used)))
    assert unknown == [], f"the browser reads fields TimelineDoc does not declare: {unknown}"
    # ...and every declared field is read, in the document and the records reached by name.
    for cls in (TimelineDoc, fields.Sources, fields.Source, document.Models,
                timeline.rows.PlotSize):  # fmt: skip
        declared = {f.name for f in dataclasses.fields(cls)}
        assert declared - used.get(cls, set()) == set(), f"{cls.__name__}: fields never read"


def test_the_scan_sees_a_field_the_document_lacks() -> None:
    """The check above fails on a read of an undeclared field (here, a made-up one)."""
    used: dict[type, set[str]] = {}
    assert _walk(TimelineDoc, ("sources", "marks", "colour"), used) == "sources.marks.colour"
    assert _walk(TimelineDoc, ("lane_count",), used) == "lane_count"
    assert _walk(TimelineDoc, ("groups", "length"), used) is None


def test_the_json_is_the_dataclass_field_for_field() -> None:
    tl = timeline.build(small_profile())
    out = tl.meta
    assert list(out) == [f.name for f in dataclasses.fields(TimelineDoc)]
    assert out["schema"] == document.SCHEMA
    assert json.loads(json.dumps(out, allow_nan=False)) == out  # plain JSON, no NaN
    assert set(out["sources"]) == {f.name for f in dataclasses.fields(fields.Sources)}
    assert out["pane"]["kernel"] == [list(r) for r in fields.pane_rows("kernel")]
    assert tl.meta is tl.meta, "written out once"


def test_the_browser_reads_the_schema_python_writes() -> None:
    got = node_eval(
        f"import {{ SCHEMA }} from {json.dumps(str(JS / 'document.mjs'))};"
        "console.log(JSON.stringify(SCHEMA));"
    )
    assert got == document.SCHEMA


def _builds(tmp_path: Path) -> list[tuple[str, Any]]:
    write_job(tmp_path)
    job = nbprof.load(tmp_path)
    data, gaps = timeline.collect_job(job)
    return [
        ("profile", timeline.build(small_profile(samples=True))),
        ("ranks", timeline.build(nbprof.load(tmp_path, job=False))),
        ("job", timeline.build(None, data=data, idle_gaps=gaps)),
    ]


def test_every_source_the_browser_fills_has_the_bokeh_documents_columns(
    tmp_path: Path,
) -> None:
    for what, tl in _builds(tmp_path):
        groups = tl.doc.groups
        assert (len(groups) > 1) == (what != "profile"), what
        for collapsed in ([False] * len(groups), [True] * len(groups)):
            for cap in (10_000, 0):  # exact events, then the aggregate
                meta = dict(tl.meta, cap=cap)
                out = draw(_with(tl, meta), width=4000, collapsed=collapsed or None, strict=True,
                           pane=True, query="nccl")  # fmt: skip
                filled = {**{tl.doc.sources.detail[k].name: v for k, v in out["detail"].items()},
                          fields.SOURCES.aggregate.name: out["agg"],
                          fields.SOURCES.marks.name: out["marks"],
                          fields.SOURCES.gap_hover.name: out["gapHover"],
                          fields.SOURCES.bar_labels.name: out["barLabels"],
                          fields.SOURCES.gap_labels.name: out["gapLabels"],
                          fields.SOURCES.overview.name: out["overview"],
                          **{fields.SOURCES.gap_shading[c].name: v
                             for c, v in out["shading"].items()}}  # fmt: skip
                drawn = 0
                for name, cols in filled.items():
                    assert list(cols) == list(source(tl, name)), (what, name)
                    lengths = {len(v) for v in cols.values()}
                    assert len(lengths) == 1, (what, name, lengths)
                    assert all(x is not None for v in cols.values() for x in v), (what, name)
                    drawn += lengths.pop()
                assert drawn > 0, what
                assert out["mode"] == ("exact" if cap else "aggregate")
                assert all(rows for rows in out["pane"]), "every event has its details"


def _with(tl: Any, meta: dict[str, Any]) -> Any:
    """``tl`` with its document's JSON replaced."""
    return types.SimpleNamespace(layout=tl.layout, meta=meta, parts=tl.parts)


def test_every_tooltip_names_only_columns_of_the_source_it_hovers() -> None:
    from bokeh.models import HoverTool

    tl = timeline.build(small_profile())
    main = next(iter(tl.layout.select({"name": "nbprof-timeline"})))
    hovers = [t for t in main.tools if isinstance(t, HoverTool)]
    assert len(hovers) == len(fields.DETAIL_KINDS) + 2
    for h in hovers:
        (renderer,) = h.renderers
        named = set(re.findall(r"@(\w+)", h.tooltips))
        assert named, h.name
        assert named <= set(renderer.data_source.data), (h.name, named)


def test_a_row_naming_a_value_the_source_lacks_is_refused() -> None:
    with pytest.raises(ValueError, match="'nope'"):
        fields.bokeh_text("{nope}", fields.SOURCES.aggregate.columns)
    with pytest.raises(ValueError, match="no Bokeh form"):
        fields.bokeh_text("{busy:gbps}", fields.SOURCES.aggregate.columns)
    assert fields.bokeh_text("{busy:pct} of {lane}", ("busy", "lane")) == "@busy{0.0} % of @lane"


def test_a_value_the_browser_cannot_compute_fails_the_draw() -> None:
    """A row that names a value the browser does not know cannot slip through."""
    tl = timeline.build(small_profile())
    meta = json.loads(json.dumps(tl.meta))
    meta["pane"]["kernel"].append(["made up", "{no_such_value}"])
    with pytest.raises(AssertionError, match="no_such_value"):
        draw(_with(tl, meta), pane=True)


def test_the_details_pane_says_what_the_rows_declare() -> None:
    p = small_profile()
    tl = timeline.build(p)
    out = draw(tl, pane=True)
    kernel = out["detail"]["kernel"]["i"][
        out["detail"]["kernel"]["name"].index(p.trace.kernels["name"][0])
    ]
    rows = dict(out["pane"][kernel])
    assert list(rows) == [r.label for r in fields.EVENT_ROWS
                          if r.pane and r.applies("kernel")]  # fmt: skip
    assert rows["grid × block"] == "264 × 128" and rows["occupancy"] == "50 %"
    assert rows["launched by (CPU op)"] == "aten::mm"
    assert rows["launch call"].startswith("cudaLaunchKernel on main thread: CUDA calls, ")
    copy = out["detail"]["gpu"]["i"][0]
    # The copy's size gives its rate; no launch call of it is in the trace: no such row.
    assert dict(out["pane"][copy])["rate"] == "0.10 GB/s (size ÷ duration)"
    assert "launch call" not in dict(out["pane"][copy]) and out["link"][copy] == -1
    cpu = out["detail"]["cpu"]["i"][0]
    assert [k for k, _ in out["pane"][cpu]] == ["class", "duration", "start", "lane"]


def test_columns_are_typed_and_text_is_dictionary_encoded() -> None:
    c = Column.of_text(["gemm", "copy", "gemm", "gemm"])
    assert c.values.dtype == np.uint8 and c.values.tolist() == [0, 1, 0, 0]
    assert c.labels == ("gemm", "copy")
    parts: list[bytes] = []
    j = c.json(parts)
    assert set(j) == {"dtype", "length", "part", "shuffle", "labels"} and j["length"] == 4
    assert j["part"] == len(parts) == 1  # part 0 of a pack is its header
    with pytest.raises(TypeError):
        Column(np.zeros(3, dtype=np.int64))
    assert document.smallest_uint(256) is np.uint8 and document.smallest_uint(257) is np.uint16


def test_a_document_whose_tables_disagree_in_length_is_refused() -> None:
    tl = timeline.build(small_profile())
    with pytest.raises(ValueError, match="events columns differ"):
        dataclasses.replace(tl.doc, events={**tl.doc.events, "dx": Column(np.zeros(1, np.uint32))})
    with pytest.raises(ValueError, match="one offset per lane"):
        dataclasses.replace(tl.doc, offsets=tl.doc.offsets[:-1])
