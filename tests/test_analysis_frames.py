"""The frame shortcuts of the analysis give what the pandas calls they stand for give."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from nbprof.analysis import _frames, _joined, _largest_first


def test_empty_frames_are_typed_and_never_shared() -> None:
    a = _frames.empty_typed((("rank", "int32"), ("name", "object"), ("ts", "float64")))
    expected = pd.DataFrame(
        {"rank": pd.Series(dtype="int32"), "name": pd.Series(dtype="object"),
         "ts": pd.Series(dtype="float64")}
    )  # fmt: skip
    pd.testing.assert_frame_equal(a, expected)
    a["extra"] = []  # a caller's change stays in its own copy
    b = _frames.empty_typed((("rank", "int32"), ("name", "object"), ("ts", "float64")))
    assert list(b.columns) == ["rank", "name", "ts"]
    assert list(_frames.empty(["x", "y"], "float64").dtypes) == [np.float64, np.float64]


def test_largest_first_is_pandas_stable_sort() -> None:
    # Already largest first (ties in order): the frame itself.
    done = pd.DataFrame({"dur": [5.0, 3.0, 3.0, 1.0], "k": ["a", "b", "c", "d"]})
    assert _largest_first(done) is done
    # Not sorted, with a tie (3.0 at rows 0 and 2) and a missing value (pandas puts it last).
    for dur in ([3.0, 1.0, 3.0, 5.0], [3.0, np.nan, 3.0, 5.0]):
        df = pd.DataFrame({"dur": dur, "k": ["a", "b", "c", "d"]})
        got = _largest_first(df)
        want = df.sort_values("dur", ascending=False, kind="stable").reset_index(drop=True)
        pd.testing.assert_frame_equal(got, want)
        assert got["k"].tolist() == ["d", "a", "c", "b"]
    # Rows not numbered from 0: renumbered, as reset_index does.
    shifted = done.set_axis([7, 8, 9, 10])
    pd.testing.assert_frame_equal(_largest_first(shifted), done)


def test_joined_is_concat() -> None:
    a = pd.DataFrame({"x": [1, 2]})
    assert _joined([a]) is a
    b = pd.DataFrame({"x": [3]}, index=[5])
    pd.testing.assert_frame_equal(_joined([b]), pd.DataFrame({"x": [3]}))
    pd.testing.assert_frame_equal(_joined([a, b]), pd.DataFrame({"x": [1, 2, 3]}))


def _gpu_events(spans: Sequence[tuple[float, float, float]]) -> pd.DataFrame:
    """GPU events of rank 0, device "0", as (stream, start, duration) in µs."""
    return pd.DataFrame(
        {
            "rank": np.zeros(len(spans), dtype="int32"),
            "device": pd.Series(["0"] * len(spans), dtype=object),
            "stream": [s for s, _, _ in spans],
            "ts": [float(t) for _, t, _ in spans],
            "dur": [float(d) for _, _, d in spans],
            "launch_ts": np.full(len(spans), np.nan),
        }
    ).assign(end=lambda f: f["ts"] + f["dur"])


def test_stream_gaps_largest_first_is_the_sorted_table() -> None:
    """Stream 1 runs [0, 10), [15, 20), [50, 60): gaps of 5 and 30; stream 2 runs [0, 5),
    [8, 9), [30, 31), [36, 37): gaps of 3, 21 and 5 (a tie with stream 1's 5, which comes
    first by stream). Largest first: 30, 21, 5 (stream 1), 5 (stream 2), 3."""
    from nbprof.analysis.idle import stream_gaps

    spans = [(1, 0, 10), (1, 15, 5), (1, 50, 10), (2, 0, 5), (2, 8, 1), (2, 30, 1), (2, 36, 1)]
    ev = _gpu_events(spans)
    plain = stream_gaps(ev)
    got = stream_gaps(ev, largest_first=True)
    assert got["dur"].tolist() == [30.0, 21.0, 5.0, 5.0, 3.0]
    assert got["stream"].tolist() == [1, 2, 1, 2, 2]
    want = plain.sort_values("dur", ascending=False, kind="stable").reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want)


def test_steps_on_a_device_with_no_gpu_event_have_no_first_event() -> None:
    # Steps beside no GPU event at all: each step's time to its first GPU event is unknown
    # (NaN), not an index error on the empty event column.
    from types import SimpleNamespace

    from nbprof.analysis.device import _step_frame

    d = SimpleNamespace(
        steps=pd.DataFrame({"ts": [0.0, 1000.0], "dur": [1000.0, 500.0]}),
        events=pd.DataFrame({"ts": np.zeros(0)}),
    )
    got = _step_frame(d)  # type: ignore[arg-type]
    assert got["dur"].tolist() == [1000.0, 500.0]
    assert got["pre_gpu_us"].isna().all()


def test_column_is_to_numpy() -> None:
    """_frames.column(df, c, dtype) is df[c].to_numpy(dtype): the same values and dtype,
    read-only exactly where to_numpy's array shares the frame's memory."""
    df = pd.DataFrame(
        {
            "ts": np.array([1.5, np.nan, 3.0]),
            "stream": np.array([7, 8, 9], dtype="int32"),
            "name": pd.Series(["a", "b", None], dtype=object),
            "text": pd.Series(["x", "y", "z"], dtype="str"),
            "on": np.array([True, False, True]),
        }
    )
    sliced = df[np.array([True, False, True])]
    frames = (df, sliced, df.iloc[0:0], pd.concat([df, df], ignore_index=True))
    cases = [("ts", None), ("ts", "float64"), ("stream", None), ("stream", "int64"),
             ("stream", "float64"), ("name", None), ("name", object), ("name", str),
             ("text", None), ("text", object), ("on", bool), ("on", None)]  # fmt: skip
    for f in frames:
        for c, dtype in cases:
            got, want = _frames.column(f, c, dtype), f[c].to_numpy(dtype=dtype)
            assert got.dtype == want.dtype, (c, dtype)
            # The frame's own NumPy array is never handed out writable (pandas 3's to_numpy,
            # under copy-on-write, is not either; pandas 2's is, but no caller writes to it);
            # a converted copy, or a column pandas keeps in an extension type, is as to_numpy's.
            stored = f._get_column_array(f.columns.get_loc(c))
            if isinstance(stored, np.ndarray) and (
                dtype is None or np.dtype(dtype) == stored.dtype
            ):
                assert not got.flags.writeable, (c, dtype)
            else:
                assert got.flags.writeable == want.flags.writeable, (c, dtype)
            np.testing.assert_array_equal(got, want)
    # The stored array, never writable: a caller cannot change the frame through it.
    assert not _frames.column(df, "ts").flags.writeable
    assert np.shares_memory(_frames.column(df, "ts"), df["ts"].to_numpy())
    # A converted column is the caller's own copy, as to_numpy's is.
    assert _frames.column(df, "stream", "int64").flags.writeable
    # A repeated column name, a missing one, and a dict of columns: as indexing does.
    twice = pd.concat([df[["ts"]], df[["ts"]]], axis=1)
    np.testing.assert_array_equal(
        _frames.column(twice, "ts", "float64"), twice["ts"].to_numpy(dtype="float64")
    )
    assert _frames.column(twice, "ts").shape == (3, 2)  # a frame's array, as indexing gives
    with pytest.raises(KeyError):
        _frames.column(df, "nope")
    cols = {"ts": pd.Series([2.0, 1.0])}
    np.testing.assert_array_equal(_frames.column(cols, "ts", "float64"), [2.0, 1.0])


def test_columns_read_again_are_the_frames_columns_now() -> None:
    """A column read again is what to_numpy gives now, after the frame is changed in any
    way."""

    def same(df: pd.DataFrame) -> None:
        for c in df.columns:
            numeric = pd.api.types.is_numeric_dtype(df[c].dtype)
            for dtype in (None, "float64") if numeric else (None, object):
                for _ in range(2):  # the first read fills the memo, the second reads it
                    np.testing.assert_array_equal(
                        _frames.column(df, c, dtype), df[c].to_numpy(dtype=dtype)
                    )
                    assert _frames.dtype_of(df, c) == df[c].dtype
                    assert _frames.stored_array(df, c) is not None

    df = pd.DataFrame({"a": np.arange(4.0), "b": np.arange(4), "c": np.ones(4)})
    same(df)
    assert _frames.column(df, "b", "float64") is not _frames.column(df, "b", "float64")
    df["a"] = np.arange(4.0) + 10  # replaced
    same(df)
    assert _frames.column(df, "a")[0] == 10
    df["b"] = np.array(["w", "x", "y", "z"], dtype=object)  # another type
    same(df)
    df["d"] = np.zeros(4)  # inserted
    same(df)
    del df["c"]  # dropped
    same(df)
    df.columns = ["c", "b", "a"]  # renamed
    same(df)
    np.testing.assert_array_equal(_frames.column(df, "c"), np.arange(4.0) + 10)
    df.loc[1, "c"] = -1.0  # written in place
    same(df)
    df.iloc[2, 2] = 5.0
    same(df)
    df.columns.name = "named"  # the same names
    same(df)
    df.insert(0, "e", np.arange(4) * 2)
    same(df)


def test_stream_gaps_with_host_are_name_cpu_work_of_them() -> None:
    """stream_gaps(..., host=h) fills cpu_work in the one frame it builds, as
    name_cpu_work fills it afterwards: the NAMED_GAPS largest gaps, the rest "". Stream 1
    runs [0, 10), [15, 20), [50, 60) (gaps 5, 30); stream 2 runs [0, 5), [8, 9), [30, 31)
    (gaps 3, 21); with a missing duration on stream 3 the table is sorted by pandas."""
    from types import SimpleNamespace

    from nbprof.analysis.idle import name_cpu_work, stream_gaps
    from nbprof.analysis.stalls import NAMED_GAPS

    host: Any = SimpleNamespace(describe=lambda a, b: f"{a:g}-{b:g}")
    for spans in (
        [(1, 0, 10), (1, 15, 5), (1, 50, 10), (2, 0, 5), (2, 8, 1), (2, 30, 1)],
        [(1, 0, 10), (1, 15, 5), (3, 0, np.nan), (3, 4, 1), (3, 9, 1)],
        [(1, 0, 10), (1, 12, 1)] + [(1, 13.0 + 2 * i, 1) for i in range(NAMED_GAPS + 3)],
    ):
        ev = _gpu_events(spans)
        want = name_cpu_work(stream_gaps(ev, largest_first=True), host)
        got = stream_gaps(ev, largest_first=True, host=host)
        pd.testing.assert_frame_equal(got, want)
    # The last case: gaps [10, 12) (2 µs), then [14, 15), [16, 17), ... (1 µs each).
    assert got["cpu_work"].tolist()[:3] == ["10-12", "14-15", "16-17"]
    assert got["cpu_work"].tolist()[NAMED_GAPS:] == [""] * (len(got) - NAMED_GAPS)


def test_dtype_of_is_the_columns_dtype() -> None:
    df = pd.DataFrame(
        {
            "ts": [1.0, 2.0],
            "n": np.array([1, 2], dtype="int32"),
            "o": pd.Series(["a", "b"], dtype=object),
            "s": pd.Series(["a", "b"], dtype="str"),
            "t": pd.to_datetime(["2024-01-01", "2024-01-02"]),
        }
    )
    for c in df.columns:
        assert _frames.dtype_of(df, c) == df[c].dtype, c
    if df["s"].dtype != np.dtype(object):  # pandas 3's text dtype; pandas 2 stores objects
        assert _frames.dtype_of(df, "s") == df["s"].dtype
    assert _frames.dtype_of({"x": pd.Series([1])}, "x") == np.dtype("int64")


def test_dataloader_ops_are_the_concatenated_hits() -> None:
    """The batch fetches of CPU ops and CPU-side annotations are what concatenating the
    hit rows of each gives (pandas' concat), whether their columns share types or not."""
    from nbprof.analysis.inputs import dataloader_ops

    def ops(names: list[str], tid: Any = "int64") -> pd.DataFrame:
        n = len(names)
        return pd.DataFrame(
            {
                "rank": np.zeros(n, dtype="int32"),
                "pid": np.ones(n, dtype="int64"),
                "tid": np.arange(n).astype(tid),
                "name": pd.Series(names, dtype=object),
                "ts": np.arange(n, dtype="float64") * 10.0,
                "dur": np.full(n, 2.5),
            }
        )

    cpu = ops(["aten::mm", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "x"])
    ann = ops(["ProfilerStep#1", "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"])
    ann["on_gpu"] = np.array([False, False])
    cols = ["rank", "tid", "name", "ts", "dur"]
    for a in (ann, ann.assign(tid=ann["tid"].astype("int32"))):
        want = pd.concat([cpu.iloc[[1]][cols], a.iloc[[1]][cols]], ignore_index=True)
        got = dataloader_ops(cpu, a)
        pd.testing.assert_frame_equal(got, want)
        assert list(got.dtypes) == list(want.dtypes)
    assert dataloader_ops(cpu, None)["ts"].tolist() == [10.0]


def test_launch_us_per_kernel_is_the_median_of_kernel_launches() -> None:
    """Kernel launches of 2, 4 and 9 µs (a 100 µs copy call beside them): median 4 µs."""
    from nbprof.analysis.host import Launches, launch_us_per_kernel

    calls = pd.DataFrame(
        {
            "ts": [0.0, 10.0, 20.0, 30.0],
            "dur": [2.0, 100.0, 9.0, 4.0],
            "tid": [1, 1, 1, 1],
            "name": pd.Series(["cudaLaunchKernel", "cudaMemcpyAsync"] * 2, dtype=object),
            "kernel": [True, False, True, True],
        }
    )
    assert launch_us_per_kernel(Launches(calls)) == 4.0
    assert launch_us_per_kernel(Launches(calls.assign(kernel=False))) is None
    assert launch_us_per_kernel(Launches(calls.iloc[0:0])) is None


def test_frame_keeps_each_arrays_type_and_text_as_object() -> None:
    """_frames.frame is pd.DataFrame for 1-D arrays of one length, on a RangeIndex, with
    text held as object (NumPy's fixed-width text too); anything else goes to pandas."""
    cols = {
        "n": np.array([3, 1], dtype="int32"),
        "t": np.array(["a", "b"], dtype=object),
        "w": np.where(np.array([True, False]), "host_wait", "other"),
        "x": np.array([0.5, np.nan]),
    }
    got = _frames.frame(cols)
    assert _frames.numbered(got) and list(got.columns) == ["n", "t", "w", "x"]
    assert [str(got[c].dtype) for c in got.columns] == ["int32", "object", "object", "float64"]
    assert got["w"].tolist() == ["host_wait", "other"] and got["t"].tolist() == ["a", "b"]
    want = pd.DataFrame({c: pd.Series(v, dtype=object) if v.dtype.kind in "OU" else v
                         for c, v in cols.items()})  # fmt: skip
    pd.testing.assert_frame_equal(got, want)
    # A list, a scalar or arrays of two lengths: the public constructor decides (and says).
    assert _frames.frame({"a": [1, 2], "b": np.array([1.0, 2.0])})["a"].dtype == "int64"
    with pytest.raises(ValueError):
        _frames.frame({"a": np.zeros(2), "b": np.zeros(3)})
    assert _frames.frame({}).empty


def test_gap_table_by_arrays_is_the_gap_table_by_pandas_sort() -> None:
    """_gap_table builds its rows largest first from arrays; _gap_table_sorted (taken for
    gaps of unknown length) sorts with pandas. For gaps of 5, 2 and 10 µs both give the
    same frame, text as object, the 10 µs gap first."""
    from types import SimpleNamespace

    from nbprof.analysis import stalls

    host: Any = SimpleNamespace(describe=lambda a, b: f"{a:g}-{b:g}")
    queue: Any = SimpleNamespace(describe=lambda i, cause, g1: f"queued {i} {cause} {g1:g}")
    idle = (np.array([0.0, 10.0, 20.0]), np.array([5.0, 12.0, 30.0]))
    dur = np.array([5.0, 2.0, 10.0])
    main = np.array(["host_wait", "dependency", "other"])
    args = (idle, dur, np.array([0.0, 2.0, 0.0]), main, host, 0, "0", queue)
    got = stalls._gap_table(*args)
    pd.testing.assert_frame_equal(got, stalls._gap_table_sorted(*args))
    assert got["start"].tolist() == [20.0, 0.0, 10.0]
    assert got["queued"].tolist() == [False, False, True]
    assert got["queued_us"].tolist() == [0.0, 0.0, 2.0]
    assert got["cpu_work"].tolist()[:2] == ["20-30", "0-5"]
    # A queued gap says what its work waited on, asked by its place in time order.
    assert got["cpu_work"].tolist()[2] == "queued 1 dependency 12"


def test_constructed_is_the_public_constructor() -> None:
    cells = np.empty(2, dtype=object)
    cells[0], cells[1] = (1, 2), ()
    cases = [
        {"a": np.array(["x", "y"], dtype=object), "n": np.arange(2), "c": cells},
        {"a": np.array(["x", None], dtype=object), "f": np.ones(2)},  # the constructor asks
        {"a": np.array(["x", np.nan], dtype=object)},
        {"a": np.array(["x", 1], dtype=object)},
        {"a": np.array([1, 2], dtype=object), "b": np.zeros(2, dtype="int32")},
        {"u": np.array(["x", "y"]), "b": np.array([True, False])},
        {"a": np.array([], dtype=object)},
        {"a": np.zeros(2), "b": np.zeros(3)},  # unequal lengths: the constructor's error
        {"s": pd.Series(["x", "y"]), "n": np.arange(2)},
    ]
    for cols in cases:
        try:
            want = pd.DataFrame(cols)
        except ValueError:
            with pytest.raises(ValueError):
                _frames.constructed(cols)
            continue
        pd.testing.assert_frame_equal(_frames.constructed(cols), want)
        if len(want) == 2:
            at = pd.Index([7, 3])
            pd.testing.assert_frame_equal(
                _frames.constructed(cols, index=at), pd.DataFrame(cols, index=at)
            )


def test_roofline_rows_with_their_device_are_the_assigned_frame() -> None:
    from nbprof.analysis.device import _with_device

    roof = _frames.frame(
        {
            "op": np.array(["aten::mm", "aten::addmm"], dtype=object),
            "count": np.array([3, 1]),
            "flops": np.array([1e9, np.nan]),
            "bound": np.array(["compute", "memory"], dtype=object),
        }
    )
    odd = roof.set_axis([5, 6])  # not numbered from 0: assigned as before
    for r in (roof, odd, roof.iloc[:0]):
        want = r.assign(rank=3, device="cuda:1")
        got = _with_device(r, 3, "cuda:1")
        pd.testing.assert_frame_equal(got, want, check_exact=True)
        assert list(got.dtypes) == list(want.dtypes)


def test_rows_are_the_boolean_selection(corpus: Path) -> None:
    """_frames.rows(df, mask) is df[mask]: the same frame, pickled byte for byte (blocks,
    their layout, columns and labels), for the trace's tables and frames pandas made; the
    frame itself where every row is kept."""
    import pickle

    from nbprof.trace import read

    alexnet = "hta__critical_path_alexnet__benchmark_result_2869224_1695835535_trace.json.gz"
    trace = read(corpus / alexnet, progress=False, cache=False)
    made = pd.DataFrame({"a": [1, 2, 3, 4], "b": ["w", "x", "y", "z"], "c": [0.5, 1.5, 2.5, 3.5]})
    frames = [
        trace.kernels, trace.runtime, trace.cpu_ops, trace.memcpy, trace.annotations,
        made,  # a column of pandas' text type: selected by pandas
        made.set_axis([9, 3, 5, 1]),
        made.assign(d=np.arange(4)),  # blocks not consolidated
        pd.concat([made[["a"]], made[["a"]]], axis=1),  # a repeated name
    ]  # fmt: skip
    for df in frames:
        n = len(df)
        for mask in (np.arange(n) % 3 == 0, np.arange(n) < 2, np.zeros(n, bool)):
            got, want = _frames.rows(df, mask), df[mask]
            pd.testing.assert_frame_equal(got, want, check_exact=True)
            assert pickle.dumps(got) == pickle.dumps(want)
            assert _layout(got) == _layout(want)
        assert _frames.rows(df, np.ones(n, bool)) is df
    marked = made.copy()
    marked.attrs["source"] = "x"  # kept by pandas' selection
    assert _frames.rows(marked, np.array([True, False, True, False])).attrs == {"source": "x"}


def _layout(df: pd.DataFrame) -> list[tuple[str, list[int], bool]]:
    """Each block's type, columns and whether its values are C-ordered."""
    return [
        (type(b).__name__, b.mgr_locs.as_array.tolist(), _c_ordered(b.values))
        for b in df._mgr.blocks
    ]


def _c_ordered(values: Any) -> bool:
    return bool(values.flags.c_contiguous) if isinstance(values, np.ndarray) else True


def test_a_columns_list_is_tolist() -> None:
    from nbprof.analysis.classes import _list

    arrays = _frames.frame(  # NumPy columns, text held as object
        {
            "op": np.array(["aten::mm", None, "aten::bmm"], dtype=object),
            "n": np.array([1, 2, 3], dtype="int32"),
            "x": np.array([0.5, np.nan, 2.0]),
        }
    )
    typed = pd.DataFrame({"text": pd.Series(["a", "b", None], dtype="str")})
    assert arrays["op"].dtype == object
    for df in (arrays, typed):
        for c in df.columns:
            got, want = _list(df, c), df[c].tolist()
            assert [type(v) for v in got] == [type(v) for v in want]
            assert pd.Series(got, dtype=object).equals(pd.Series(want, dtype=object))


def test_a_rows_dict_is_the_rows_to_dict(corpus: Path) -> None:
    from nbprof.trace import read

    def want(df: pd.DataFrame, i: int) -> dict[str, Any]:
        return {str(k): v for k, v in df.iloc[i].to_dict().items()}

    mixed = _frames.frame(
        {
            "rank": np.array([0, 1], dtype="int32"),
            "name": np.array(["NVIDIA H100", None], dtype=object),
            "sm": np.array([132, -1], dtype="int64"),
            "mem": np.array([8.0e10, np.nan]),
            "ok": np.array([True, False]),
        }
    )
    numbers = _frames.frame({"a": np.array([1, 2]), "b": np.array([0.5, 1.5])})  # one type
    typed = pd.DataFrame({"a": [1, 2], "t": pd.Series(["x", "y"], dtype="str")})
    frames = [mixed, numbers, typed]
    for path in sorted(corpus.glob("*.json.gz"))[:6]:
        frames.append(read(path, progress=False, cache=False).devices)
    for df in frames:
        for i in range(len(df)):
            got, exp = _frames.row_dict(df, i), want(df, i)
            assert list(got) == list(exp)
            assert [type(v) for v in got.values()] == [type(v) for v in exp.values()]
            assert pd.Series(got, dtype=object).equals(pd.Series(exp, dtype=object))
