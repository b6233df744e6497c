"""The pure path's shortcuts give exactly what the plain way gives, errors included.

Each one (integer timestamps read as numbers, vectorised columns, the ops' start order) is
checked against the straightforward way it stands for, on the inputs where the two could
differ. The helpers here (``GOOD``, ``kineto_text``...) are shared by the other trace tests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbprof
from nbprof.trace import accel, links
from nbprof.trace import decode as dec
from nbprof.trace import tables as tb


@pytest.fixture(autouse=True, params=["accelerator", "pure"])
def events_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs with pieces read by the accelerator and by the pure path (the
    accelerator's own agreement with that path is tested in tests/test_trace_accel.py)."""
    if request.param == "accelerator" and accel._accel is None:
        pytest.skip("the C accelerator is not built")
    monkeypatch.setenv(accel.ENV, "1" if request.param == "accelerator" else "0")
    return str(request.param)


def raws_of(events: list[str]) -> list[msgspec.Raw]:
    return dec._raw_list_decoder.decode(("[" + ",".join(events) + "]").encode())


def decode_chunk(raws: list[msgspec.Raw], offset: int, mode: dec.TsMode | None) -> Any:
    return dec._decode_joined(dec.json_array(raws), offset, len(raws), "t.json", mode)


def both_ways(events: list[str]) -> tuple[Any, Any]:
    """(result or error text) of a run decoded with and without the integer-timestamp path."""
    out = []
    for mode in (dec.TsMode(), None):
        try:
            evs, ts = decode_chunk(raws_of(events), 0, mode)
            out.append(([(e.ph, e.name, e.pid, e.dur) for e in evs], ts.tolist()))
        except nbprof.TraceError as e:
            out.append(str(e))
    return out[0], out[1]


@pytest.mark.parametrize(
    "ts_texts",
    [
        ["1700000000000000", "1700000000000007", "0"],
        ["1700000000000000", None, "5"],  # an event without ts
        ["1700000000000000.125", "3"],  # a float: the exact path keeps the ns
        ["1e3", "2"],
        ["9000000000000000", "1"],
        ["9000000000000001", "1"],  # past the bound: out of range either way
        ["18446744073709551616", "1"],  # beyond uint64
        ["9223372036854775808", "1"],  # 2**63: beyond int64, within uint64
        [None, "9223372036854775808"],  # the same beside an event without ts
        ["1", "2.0"],  # an integral float after an int
        ["-0", "1"],
        ["-3", "1"],
        ["null", "1"],
        ['"12"', "1"],
        ["true", "1"],
    ],
)
def test_integer_timestamps_agree_with_the_exact_path(ts_texts: list[str | None]) -> None:
    events = [
        '{"ph":"X","name":"n'
        + str(i)
        + '","pid":1,"dur":2'
        + ("" if t is None else ',"ts":' + t)
        + "}"
        for i, t in enumerate(ts_texts)
    ]
    fast, exact = both_ways(events)
    assert fast == exact


def test_a_float_chunk_turns_the_integer_path_off_for_the_file() -> None:
    mode = dec.TsMode()
    _, ts = decode_chunk(raws_of(['{"ts":5}']), 0, mode)
    assert mode.try_int and ts.tolist() == [5000]
    _, ts = decode_chunk(raws_of(['{"ts":5.0015}']), 1, mode)
    assert not mode.try_int and ts.tolist() == [5001]
    _, ts = decode_chunk(raws_of(['{"ts":7}']), 2, mode)
    assert ts.tolist() == [7000]


# -- vectorised columns against the straightforward definitions --------------------------------


def num_reference(values: list[Any], dtype: type, missing: float) -> np.ndarray:
    out = np.array([missing if v is None else v for v in values], np.float64)
    bad = ~np.isfinite(out) | (np.abs(out) > float(2**62))
    out[bad] = missing
    return out.astype(np.int64) if dtype is np.int64 else out


def dims_reference(vals: list[Any]) -> np.ndarray:
    return np.array([tb._product(v) for v in vals], np.int64)


def stream_reference(streams: list[Any], tid: np.ndarray) -> np.ndarray:
    # The value-at-a-time path, which the vectorised one must match exactly.
    return tb._stream_each(streams, tid, tb.Ids())


BIG = st.integers(-(2**70), 2**70)
NUMBER = st.one_of(st.none(), BIG, st.floats(allow_nan=False), st.integers(-50, 50))
DIM = st.one_of(
    st.none(), st.integers(-5, 2**40), st.lists(st.integers(0, 2**31), min_size=0, max_size=4)
)
STREAM = st.one_of(st.none(), BIG, st.integers(0, 64), st.sampled_from(["7", "0x10", "s 1"]))


@settings(max_examples=200, deadline=None)
@given(st.lists(NUMBER, max_size=8), st.booleans())
def test_numeric_columns_match_the_reference(values: list[Any], as_int: bool) -> None:
    dtype, missing = (np.int64, -1) if as_int else (np.float64, np.nan)
    np.testing.assert_array_equal(
        tb._num(values, dtype, missing), num_reference(values, dtype, missing)
    )


@settings(max_examples=200, deadline=None)
@given(st.lists(DIM, max_size=8), st.lists(st.lists(st.integers(0, 2**20), min_size=3,
       max_size=3), max_size=6))  # fmt: skip
def test_launch_dimensions_match_the_reference(mixed: list[Any], triples: list[Any]) -> None:
    for vals in (mixed, triples):
        args = [dec.KernelArgs(grid=v) for v in vals]
        np.testing.assert_array_equal(tb._dims(args, "grid"), dims_reference(vals))


@settings(max_examples=200, deadline=None)
@given(st.lists(STREAM, max_size=8), st.booleans())
def test_stream_column_matches_the_reference(streams: list[Any], ints_only: bool) -> None:
    if ints_only:
        streams = [s for s in streams if type(s) is int]
    tid = np.arange(len(streams), dtype=np.int64) + 100
    np.testing.assert_array_equal(
        tb._stream_col(streams, tid, tb.Ids()), stream_reference(streams, tid)
    )


def test_stream_values_one_at_a_time() -> None:
    # What the reference itself gives: numeric text in any base is its number, other text
    # and ints beyond the safe range get stable negative codes, absent keeps the thread id.
    ids = tb.Ids()
    got = tb._stream_each(["7", "0x10", "s 1", None, 2**70, "s 1"], np.arange(6) + 100, ids)
    assert got.tolist() == [7, 16, -2, 103, -3, -2]


def test_raw_texts_match_one_by_one_decoding() -> None:
    raws = [r for r in raws_of(["[[8, 16], []]", '"c10::Half"', '["\\u00e9", "ß"]'])]
    raws.insert(1, dec._EMPTY)
    got = tb._raw_texts(raws).texts()
    assert got == [bytes(r).decode("utf-8", "replace") if len(r) else "" for r in raws]
    assert got[1] == ""


# -- flow events, read only where some correlation is missing ----------------------------------


def flow(ph: str, fid: int | str, pid: int | str, tid: int | str, ts: int) -> dict[str, Any]:
    return {"ph": ph, "id": fid, "pid": pid, "tid": tid, "ts": ts, "cat": "ac2g", "name": "ac2g"}


def test_flows_with_text_thread_ids_link_across_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nbprof.trace import reader

    t0 = 1_700_000_000_000_000

    def x(cat: str, name: str, ts: int, pid: int | str, tid: int | str) -> dict[str, Any]:
        return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": 3}

    ev = [
        # A flow whose text thread id no table row has: it must link nothing.
        flow("s", 5, 1, "worker", t0 + 1),
        flow("f", 5, 0, "worker", t0 + 30),
        x("Runtime", "cudaLaunchKernel", t0 + 10, 1, "main"),
        flow("s", 99, 1, "main", t0 + 10),
        x("Kernel", "k1", t0 + 40, 0, "stream 7"),
        flow("f", 99, 0, "stream 7", t0 + 40),
        x("Kernel", "k2", t0 + 30, 0, "stream 8"),
    ]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    whole = nbprof.trace.read(p)
    monkeypatch.setattr(reader, "CHUNK", 2)
    chunked = nbprof.trace.read(p)
    # Text thread ids get codes in the order they are met, so only the links are compared.
    cols = ["name", "correlation", "launch_name", "launch_ts"]
    pd.testing.assert_frame_equal(whole.kernels[cols], chunked.kernels[cols])
    k = whole.kernels.set_index("name")
    assert k.loc["k1", "correlation"] == 99 and k.loc["k1", "launch_name"] == "cudaLaunchKernel"
    assert k.loc["k2", "correlation"] == -1 and k.loc["k2", "launch_name"] == ""
    assert k.loc["k1", "stream"] != k.loc["k2", "stream"]


def test_flows_not_read_when_every_event_has_a_correlation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_args: Any) -> Any:
        raise AssertionError("flow events read although no correlation was missing")

    monkeypatch.setattr(links, "correlate_by_flows", refuse)
    ev = [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 40, "dur": 3,
         "args": {"correlation": 4}},
        flow("f", 4, 0, 7, 40),
    ]  # fmt: skip
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    assert nbprof.trace.read(p).kernels["correlation"].tolist() == [4]


def test_garbage_collection_is_restored_after_a_load(tmp_path: Path) -> None:
    import gc

    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": [{"ph": "X", "ts": 1, "dur": 1}]}))
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        try:
            nbprof.trace.read(p)
            with pytest.raises(nbprof.TraceError):
                nbprof.trace.read(bad)
            assert gc.isenabled() is enabled
        finally:
            gc.enable()


@pytest.mark.parametrize("numpy_strings", ["numpy.strings", "numpy.char only"])
def test_decimal_timestamps_parse_the_same_on_older_numpy(
    numpy_strings: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """numpy.strings.partition came with numpy 2.1; before it the split is np.char's, whose
    result is one (n, 3) array: both give the same nanoseconds."""
    if numpy_strings != "numpy.strings":
        monkeypatch.setattr(np, "strings", None, raising=False)

    def one_by_one(text: bytes, index: int, path: str) -> int:
        raise AssertionError(f"{text!r} left the vectorised parse")

    monkeypatch.setattr(dec, "_parse_one", one_by_one)
    texts = [b"1.5", b"12.0625", b"7", b"1693.123456", b"0.001", b""]
    got = dec.parse_ts_ns([msgspec.Raw(t) for t in texts], "t.json")
    # µs to ns, the fraction truncated to whole ns; empty text reads as NO_TS.
    assert got.tolist() == [1_500, 12_062, 7_000, 1_693_123, 1, dec.NO_TS]


def plain_num(values: list[Any], dtype: type, missing: float) -> np.ndarray:
    """tables._num the straightforward way: every value through np.array."""
    out = np.array(values, np.float64)
    bad = ~np.isfinite(out) | (np.abs(out) > float(2**62))
    out[bad] = missing
    return out.astype(np.int64) if dtype is np.int64 else out


_NUMBERS = st.one_of(
    st.none(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 2**53 + 1, 2**62, 2**62 + 1, -(2**62), 2**63, 1e308, -0.0]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_NUMBERS, max_size=8), st.sampled_from([(np.int64, -1), (np.float64, np.nan)]))
def test_numeric_columns_agree_with_the_plain_way(
    values: list[Any], kind: tuple[type, float]
) -> None:
    dtype, missing = kind
    got, want = tb._num(values, dtype, missing), plain_num(values, dtype, missing)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


_STARTS = st.one_of(st.sampled_from([0.0, 1.0, 2.5, np.nan]), st.floats(0, 10, width=16))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_STARTS, st.sampled_from([0.0, 1.0, 3.0])), max_size=10))
def test_op_order_is_lexsorts(rows: list[tuple[float, float]]) -> None:
    ts = np.array([r[0] for r in rows], np.float64)
    dur = np.array([r[1] for r in rows], np.float64)
    np.testing.assert_array_equal(links.start_order(ts, dur), np.lexsort((-dur, ts)))


# -- texts shared by the trace tests ------------------------------------------------------


def kineto_text(events: list[Any], *, after: str = '"traceName": "t"', indent: str = "  ") -> str:
    """A trace laid out as Kineto writes it: each event a block at ``indent``."""
    blocks = []
    for ev in events:
        text = ev if isinstance(ev, str) else _block(ev)
        blocks.append("\n".join(indent + line for line in text.split("\n")))
    tail = f",\n  {after}" if after else ""
    return (
        '{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    {"id": 0, "numSms": 80}\n  ],\n'
        '  "traceEvents": [\n' + ",\n".join(blocks) + f"\n  ]{tail}\n}}\n"
    )


def _block(ev: dict[str, Any]) -> str:
    """An event as Kineto writes it: a key a line, ``args`` a key a line deeper, each value
    on one line as ``json.dumps`` writes it (so its text is the one-line file's)."""

    def lines(d: dict[str, Any], pad: str) -> str:
        inner = pad + "  "
        return ",\n".join(
            f"{inner}{json.dumps(k)}: "
            + (
                "{\n" + lines(v, inner) + "\n" + inner + "}"
                if k == "args" and isinstance(v, dict) and v
                else json.dumps(v)
            )
            for k, v in d.items()
        )

    return "{\n" + lines(ev, "") + "\n}"


def _x(cat: str, name: str, ts: Any, dur: Any = 2, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 2, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip


GOOD = [
    _x("cpu_op", "aten::mm", 100, 50, **{"External id": 1, "Input Dims": [[2, 3], [3, 4]]}),
    _x("cuda_runtime", "cudaLaunchKernel", 110, 5, correlation=7),
    _x("kernel", "gemm", 130, 9, device=0, stream=7, correlation=7, grid=[1, 2, 3]),
    {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 7, "pid": 1, "tid": 2, "ts": 110},
    {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 7, "pid": 0, "tid": 7, "ts": 130},
    _x("user_annotation", "ProfilerStep#3", 90, 200),
    {"ph": "i", "cat": "cpu_instant_event", "name": "i", "pid": 1, "tid": 2, "ts": 95},
    _x("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 150, 3, device=0, stream=7, bytes=8),
    _x("kernel", "nccl_all_reduce", 160, 4, device=0, stream=7, correlation=8),
]


def read_each_way(path: Path, monkeypatch: pytest.MonkeyPatch, env: str) -> tuple[Any, Any]:
    """(trace or error text) read with the switch ``env`` on ("1"), then off ("0")."""
    out: list[Any] = []
    for on in ("1", "0"):
        monkeypatch.setenv(env, on)
        try:
            out.append(nbprof.trace.read(path, progress=False, cache=False))
        except nbprof.TraceError as e:
            out.append(str(e))
    return out[0], out[1]


def assert_same_either_way(one: Any, two: Any) -> None:
    from tests.test_trace_cache import assert_same

    if isinstance(one, str) or isinstance(two, str):
        assert one == two
    else:
        assert_same(one, two)
