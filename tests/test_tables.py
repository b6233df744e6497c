"""The table declarations: every name derived from them keeps its value, the dtypes agree,
the diagnosis reads its tables as attributes, and docs/tables.md is written from them."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from golden import KinetoBuilder, read_trace

from nbprof.analysis import analyze
from nbprof.analysis import model as am
from nbprof.analysis.model import DIAGNOSIS_TABLES, Diagnosis, Verdict
from nbprof.trace import model as tm
from nbprof.trace.model import SCHEMA, Column, Table, empty_table, tables_markdown

DOC = Path(__file__).resolve().parent.parent / "docs" / "tables.md"


def test_the_column_tuples_keep_their_values() -> None:
    # Readers and the analysis import these names; a declaration must not move a column.
    assert tm.KERNEL_COLUMNS == (
        "rank", "device", "stream", "name", "ts", "dur", "correlation", "grid", "block",
        "registers", "shared_mem", "occupancy", "blocks_per_sm", "launch_ts", "launch_name",
        "op", "op_index",
    )  # fmt: skip
    assert tm.MEMCPY_COLUMNS == (
        "rank", "device", "stream", "name", "ts", "dur", "correlation", "bytes", "kind", "src",
        "dst", "launch_ts", "launch_name", "op", "op_index",
    )  # fmt: skip
    assert tm.MEMSET_COLUMNS == (
        "rank", "device", "stream", "name", "ts", "dur", "correlation", "bytes", "launch_ts",
        "launch_name", "op", "op_index",
    )  # fmt: skip
    assert tm.RUNTIME_COLUMNS == (
        "rank", "pid", "tid", "name", "ts", "dur", "correlation", "cat", "wait_on_stream",
    )  # fmt: skip
    assert tm.CPU_OP_COLUMNS == (
        "rank", "pid", "tid", "name", "ts", "dur", "external_id", "flops", "input_dims",
        "input_types", "depth",
    )  # fmt: skip
    assert tm.ANNOTATION_COLUMNS == ("rank", "pid", "tid", "name", "ts", "dur", "on_gpu")
    assert tm.STEP_COLUMNS == ("rank", "step", "name", "ts", "dur")
    assert tm.DEVICE_COLUMNS == (
        "rank", "device", "name", "vendor", "sm_count", "compute_capability", "total_memory",
        "max_threads_per_sm",
    )  # fmt: skip
    assert tm.COUNTER_COLUMNS == ("rank", "device", "name", "ts", "metric", "value")
    assert tm.COMM_COLUMNS == (
        "rank", "pid", "tid", "name", "ts", "dur", "source", "device", "correlation",
        "collective", "pg", "pg_ranks", "group_size", "seq", "in_nelems", "out_nelems", "dtype",
        "input_dims", "input_types",
    )  # fmt: skip
    assert list(tm.TABLES) == [
        "kernels", "memcpy", "memset", "runtime", "cpu_ops", "annotations", "steps", "devices",
        "counters", "comms",
    ]  # fmt: skip
    assert tm.TABLES["kernels"] is tm.KERNEL_COLUMNS


def test_the_dtypes_keep_their_values() -> None:
    assert tm._DTYPES == {
        "rank": "int32", "stream": "int64", "ts": "float64", "dur": "float64",
        "correlation": "int64", "grid": "int64", "block": "int64", "registers": "int64",
        "shared_mem": "int64", "occupancy": "float64", "blocks_per_sm": "float64",
        "launch_ts": "float64", "op_index": "int64", "bytes": "int64", "pid": "int64",
        "tid": "int64", "external_id": "int64", "flops": "float64", "depth": "int32",
        "on_gpu": "bool", "step": "int64", "sm_count": "int64", "total_memory": "int64",
        "max_threads_per_sm": "int64", "value": "float64", "group_size": "int64",
        "seq": "int64", "in_nelems": "int64", "out_nelems": "int64",
        "wait_on_stream": "int64",
    }  # fmt: skip
    for table in SCHEMA:
        empty = empty_table(table.name)
        assert tuple(empty.columns) == table.names and len(empty) == 0
        for c in table.columns:
            # Text is categorical (its categories the distinct values, sorted).
            assert str(empty[c.name].dtype) == tm._DTYPES.get(c.name, "category"), c.name


def test_a_column_name_has_one_dtype_in_every_table() -> None:
    a = Table("a", "", (Column("x", "int64", ""),))
    b = Table("b", "", (Column("x", "float64", ""),))
    with pytest.raises(TypeError, match="'x' has two dtypes: int64, float64"):
        tm._shared_dtypes([a, b])


def test_missing_values_match_their_dtype() -> None:
    for table in (*SCHEMA, *DIAGNOSIS_TABLES):
        for c in table.columns:
            if c.missing is None:
                continue
            if c.dtype in ("object", tm.TEXT):
                assert c.missing == "", (table.name, c.name)
            elif c.dtype.startswith("int"):
                assert c.missing == -1, (table.name, c.name)
            else:
                assert c.dtype == "float64" and math.isnan(c.missing), (table.name, c.name)


def test_a_real_read_has_the_declared_columns_and_dtypes(tmp_path: Path) -> None:
    b = KinetoBuilder()
    b.kernel("ampere_sgemm_128x64_nn", 0, 10, grid=(66, 1, 1), occupancy=50)
    b.memcpy(20, 5, 4096)
    trace = read_trace(b.write(tmp_path))
    for table in SCHEMA:
        frame = getattr(trace, table.name)
        assert tuple(frame.columns[: len(table.names)]) == table.names
        for c in table.columns:
            assert str(frame[c.name].dtype) == c.dtype, (table.name, c.name)
            if c.dtype == tm.TEXT:  # categories: the distinct text, sorted, as str
                kinds = frame[c.name].cat.categories.tolist()
                assert kinds == sorted(set(kinds)) and all(type(k) is str for k in kinds)


def test_diagnosis_tables_are_attributes(tmp_path: Path) -> None:
    b = KinetoBuilder()
    b.kernel("ampere_sgemm_128x64_nn", 0, 10, launch_ts=-5)
    b.kernel("ampere_sgemm_128x64_nn", 50, 10, launch_ts=45)  # a 40 µs host-wait gap
    d = analyze(read_trace(b.write(tmp_path)))
    assert [t.name for t in DIAGNOSIS_TABLES] == list(d.tables)
    for t in DIAGNOSIS_TABLES:
        assert getattr(d, t.name) is d.tables[t.name]
        assert tuple(d.tables[t.name].columns[: len(t.names)]) == t.names, t.name
    assert d.idle_gaps["dur"].tolist() == pytest.approx([40.0])
    # A diagnosis built without its tables reads each as the declared table, empty.
    bare = Diagnosis({}, [], Verdict("idle", ""), [])
    assert tuple(bare.stalls.columns) == am.STALLS_TABLE.names and bare.stalls.empty
    assert str(bare.stalls["queued"].dtype) == "bool"


def render_doc() -> str:
    return (
        "# Table reference\n\n"
        "Written from the declarations in `nbprof/trace/model.py` (the trace's tables) and\n"
        "`nbprof/analysis/model.py` (the diagnosis's): regenerate with\n"
        "`python tests/test_tables.py`. Times are µs relative to `Trace.origin_ns`; every\n"
        "frame has at least these columns, in this order; extra columns are allowed.\n"
        '"unknown" is the value a column holds where the trace does not say.\n\n'
        "## Trace tables (`Trace.kernels`, ...)\n\n"
        + tables_markdown(SCHEMA)
        + "\n## Diagnosis tables (`Diagnosis.idle_gaps`, ...)\n\n"
        + tables_markdown(DIAGNOSIS_TABLES)
    )


def test_docs_tables_md_is_written_from_the_declarations() -> None:
    assert DOC.read_text(encoding="utf-8") == render_doc(), (
        "docs/tables.md is stale: run python tests/test_tables.py"
    )


def test_empty_tables_are_typed() -> None:
    frame = am.SYNCS_TABLE.empty()
    assert isinstance(frame, pd.DataFrame) and str(frame["pct"].dtype) == "float64"


if __name__ == "__main__":
    DOC.write_text(render_doc(), encoding="utf-8")
    print(f"wrote {DOC}")
