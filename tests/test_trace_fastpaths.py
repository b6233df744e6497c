"""The reader's fast paths give exactly what the plain way gives, errors included.

Each fast path (integer timestamps read as numbers, the one-pass split of the top level,
vectorised columns, name factorizations shared within an analysis) is checked against the
straightforward way it replaces, on the inputs where the two could differ.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbprof
from nbprof.analysis import _text
from nbprof.trace import decode as dec
from nbprof.trace import reader, scan
from nbprof.trace import tables as tb
from tests.conftest import corpus_params


@pytest.fixture(autouse=True, params=["scanner", "python"])
def events_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs with pieces read by the C scanner and by the Python path (the
    scanner's own agreement with that path is tested in tests/test_trace_scan.py)."""
    if request.param == "scanner" and not scan.available():
        pytest.skip("the C scanner is not built")
    monkeypatch.setenv(scan.ENV, "1" if request.param == "scanner" else "0")
    return str(request.param)


def raws_of(events: list[str]) -> list[msgspec.Raw]:
    return dec._raw_list_decoder.decode(("[" + ",".join(events) + "]").encode())


def both_ways(events: list[str]) -> tuple[Any, Any]:
    """(result or error text) of decode_chunk with and without the integer-timestamp path."""
    out = []
    for mode in (dec.TsMode(), None):
        try:
            evs, ts = dec.decode_chunk(raws_of(events), 0, "t.json", mode)
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
    _, ts = dec.decode_chunk(raws_of(['{"ts":5}']), 0, "t.json", mode)
    assert mode.try_int and ts.tolist() == [5000]
    _, ts = dec.decode_chunk(raws_of(['{"ts":5.0015}']), 1, "t.json", mode)
    assert not mode.try_int and ts.tolist() == [5001]
    _, ts = dec.decode_chunk(raws_of(['{"ts":7}']), 2, "t.json", mode)
    assert ts.tolist() == [7000]


def two_pass(data: bytes) -> tuple[list[bytes], dict[str, Any]]:
    top = dec._top_decoder.decode(data)
    del top["traceEvents"]
    raws = dec._file_decoder.decode(data).traceEvents
    return [bytes(r) for r in raws], {k: msgspec.json.decode(v) for k, v in top.items()}


EV = '{"ph":"X","ts":1,"dur":2}'


@pytest.mark.parametrize(
    "text",
    [
        t.replace("@", EV)
        for t in [
            '{"traceEvents":[@,@],"schemaVersion":1}',
            '{"schemaVersion":1,"traceEvents":[@]}',
            '{"a":{"traceEvents":[1]},"traceEvents":\n[ \t@\r\n ]  ,"b":"]["}',
            ' \n{"b":[1,2,3],"traceEvents":[@],"c":"x \\"traceEvents\\": [",'
            '"deviceProperties":[{"id":0}]}\n',
            '{"traceEvents":[@, {"name":"ß ☃ \\u00e9"}]}',
        ]
    ],
)
def test_one_pass_split_matches_the_two_pass_skim(text: str) -> None:
    data = text.encode()
    got = dec._split_top(data)
    assert got is not None
    raws, top, repeated = got
    assert repeated is None
    del top["traceEvents"]
    want_raws, want_top = two_pass(data)
    assert [bytes(r) for r in raws] == want_raws
    assert {k: msgspec.json.decode(v) for k, v in top.items()} == want_top
    assert list(top) == list(want_top)  # key order kept too


@pytest.mark.parametrize(
    "text", ['{"traceEvents":[]}', '{"traceEvents":5}', '{"traceEvents":[1,', "[1]", "{}"]
)
def test_one_pass_split_leaves_unusual_files_to_the_two_pass_way(text: str) -> None:
    assert dec._split_top(text.encode()) is None


def test_decode_file_metadata_is_the_same_either_way(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = {
        "schemaVersion": 1,
        "traceEvents": [json.loads(EV)],
        "distributedInfo": {"rank": 3},
        "baseTimeNanoseconds": 100,
    }
    data = json.dumps(doc).encode()
    one = dec.decode_file(data, "t.json")
    monkeypatch.setattr(dec, "_split_top", lambda _data: None)
    two = dec.decode_file(data, "t.json")
    assert (one.metadata, one.rank, one.base_ns) == (two.metadata, two.rank, two.base_ns)
    assert [bytes(r) for r in one.raw_events] == [bytes(r) for r in two.raw_events]


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
    got = tb._raw_texts(raws).tolist()
    assert got == [bytes(r).decode("utf-8", "replace") if len(r) else "" for r in raws]
    assert got[1] == ""


# -- name matching: one factorization per column inside an analysis ----------------------------


def test_shared_factorizations_give_the_same_matches() -> None:
    names = pd.Series(["volta_h884gemm", "elementwise", "sm90_xmma", None, "elementwise"] * 3)
    frame = pd.DataFrame({"name": names.astype(object)})
    patterns = [re.compile("gemm|xmma"), "^elem", "nothing"]
    plain = [_text.matches(frame["name"], p) for p in patterns]
    with _text.shared_factorizations():
        shared = [_text.matches(frame["name"], p) for p in patterns]
        sliced = _text.matches(frame["name"].iloc[5:], patterns[0])
    for a, b in zip(plain, shared, strict=True):
        np.testing.assert_array_equal(a, b)
    # A view of other rows is its own key, not a stale hit.
    np.testing.assert_array_equal(sliced, plain[0][5:])
    # Outside the block nothing is remembered: a changed column is factorized afresh.
    frame.loc[0, "name"] = "nothing here"
    assert _text.matches(frame["name"], "nothing")[0]


# -- flow events, built only when some correlation is missing ----------------------------------


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


def test_flows_not_decoded_when_every_event_has_a_correlation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_args: Any) -> Any:
        raise AssertionError("flow events decoded although no correlation was missing")

    monkeypatch.setattr(dec, "decode_flows", refuse)
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
    np.testing.assert_array_equal(reader._start_order(ts, dur), np.lexsort((-dur, ts)))


# -- events read by pieces (no skim) against the skim -----------------------------------------


def kineto_text(events: list[Any], *, after: str = '"traceName": "t"', indent: str = "  ") -> str:
    """A trace laid out as Kineto writes it: each event a block at ``indent``."""
    blocks = []
    for ev in events:
        text = ev if isinstance(ev, str) else json.dumps(ev, indent=2)
        blocks.append("\n".join(indent + line for line in text.split("\n")))
    tail = f",\n  {after}" if after else ""
    return (
        '{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    {"id": 0, "numSms": 80}\n  ],\n'
        '  "traceEvents": [\n' + ",\n".join(blocks) + f"\n  ]{tail}\n}}\n"
    )


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


def by_pieces_and_skimmed(
    text: str | bytes,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    chunk: int,
    gz: bool,
    piece_bytes: int | None = None,
) -> tuple[Any, Any, int]:
    """(trace or error text) read by pieces (of ``piece_bytes``, else the reader's size for
    ``chunk``), then skimmed; and how many pieces decoded."""
    import gzip

    data = text.encode() if isinstance(text, str) else text
    p = tmp_path / ("t.json.gz" if gz else "t.json")
    p.write_bytes(gzip.compress(data) if gz else data)
    monkeypatch.setattr(reader, "CHUNK", chunk)
    # The whole file's pieces against its skim: streaming is compared with both in
    # tests/test_trace_stream.py.
    monkeypatch.setenv(reader.STREAM_ENV, "0")
    decoded = [0]

    def counting(real: Any) -> Any:
        def count(*args: Any) -> Any:
            got = real(*args)
            decoded[0] += got is not None
            return got

        return count

    # A piece is decoded by the scanner or by msgspec: count both.
    monkeypatch.setattr(dec, "decode_piece", counting(dec.decode_piece))
    monkeypatch.setattr(scan, "scan_piece", counting(scan.scan_piece))
    out = []
    pieces = reader._piece_bytes if piece_bytes is None else lambda: piece_bytes
    for size in (pieces, lambda: 0):
        monkeypatch.setattr(reader, "_piece_bytes", size)
        try:
            out.append(nbprof.trace.read(p, progress=False))
        except nbprof.TraceError as e:
            out.append(str(e))
    return out[0], out[1], decoded[0]


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


def test_pieces_end_before_values_written_after_the_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Newer PyTorch writes deviceProperties after the event array, its objects at the
    # events' indentation: the array still ends at its own "]", and nothing after it is
    # read as events or lost from the metadata.
    events = ",\n".join(
        "\n".join("    " + line for line in json.dumps(e, indent=2).split("\n")) for e in GOOD
    )
    props = ",\n".join(
        "    {\n" + f'      "id": {i}, "name": "GPU {i}", "numSms": {100 + i}' + "\n    }"
        for i in range(3)
    )
    text = (
        '{\n  "traceEvents": [\n' + events + '\n  ],\n  "schemaVersion": 1,\n'
        '  "deviceProperties": [\n' + props + '\n  ],\n  "traceName": "t"\n}\n'
    )
    one, two, pieces = by_pieces_and_skimmed(text, tmp_path, monkeypatch, 8192, False)
    assert_same_either_way(one, two)
    assert pieces == 1
    assert not isinstance(one, str)
    assert one.devices["sm_count"].tolist() == [100, 101, 102]
    assert [p["numSms"] for p in one.metadata["deviceProperties"]] == [100, 101, 102]


@pytest.mark.parametrize("path", corpus_params())
def test_corpus_traces_read_by_pieces_as_by_the_skim(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.test_trace_cache import assert_same

    monkeypatch.setenv("NBPROF_PARSE_WORKERS", "1")
    one = nbprof.trace.read(path, progress=False, cache=False)
    monkeypatch.setattr(reader, "_piece_bytes", lambda: 0)
    assert_same(one, nbprof.trace.read(path, progress=False, cache=False))


@pytest.mark.parametrize("gz", [True, False])
@pytest.mark.parametrize("chunk", [1, 2, 8192])
def test_pieces_read_what_the_skim_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int, gz: bool
) -> None:
    one, two, pieces = by_pieces_and_skimmed(kineto_text(GOOD), tmp_path, monkeypatch, chunk, gz)
    assert_same_either_way(one, two)
    assert not isinstance(one, str) and len(one.kernels) == 2
    assert pieces >= (2 if chunk < 8192 else 1)


def test_pieces_link_by_flows_as_the_skim_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No correlation ids: the flow events are found again by a skim of the pieces' file.
    ev = [dict(e, args={k: v for k, v in e["args"].items() if k != "correlation"})
          if "args" in e else e for e in GOOD]  # fmt: skip
    ev[2].update(pid=0, tid=7)  # where its flow event ends
    one, two, pieces = by_pieces_and_skimmed(kineto_text(ev), tmp_path, monkeypatch, 2, True)
    assert_same_either_way(one, two)
    assert pieces and not isinstance(one, str)
    assert one.kernels["correlation"].tolist()[0] == 7


#: An event whose args hold the text between two events, one level deeper.
NESTED_SEPARATOR = (
    '{"ph": "X", "cat": "cpu_op", "name": "n", "pid": 1, "tid": 2, "ts": 1,\n'
    '"args": {"a": [{"x": 1},\n{"y": 2}]}}'
)
BAD_EVENT = _x("kernel", "bad", 140, 1, device=0, stream=7, correlation="seven")
CASES = {
    "bad args type in a later piece": kineto_text([*GOOD, BAD_EVENT, *GOOD]),
    "bad field type": kineto_text([*GOOD, dict(GOOD[0], pid=[1]), *GOOD]),
    "negative duration, then bad JSON": kineto_text(
        [*GOOD, _x("kernel", "k", 5, -1), *GOOD]
    ).replace('"traceName": "t"', '"traceName": '),
    "float timestamps": kineto_text([*GOOD, _x("cpu_op", "f", 123.4567), *GOOD]),
    "a string timestamp": kineto_text([*GOOD, _x("cpu_op", "f", "12"), *GOOD]),
    "no ts": kineto_text([*GOOD, {"ph": "X", "cat": "cpu_op", "name": "n", "dur": 1}]),
    "bad UTF-8 in a name": kineto_text([*GOOD, *GOOD]).replace("gemm", "g\udcffm"),
    "separator text deeper in an event": kineto_text([*GOOD, NESTED_SEPARATOR, *GOOD]),
    "duplicate traceEvents": kineto_text(GOOD, after='"traceEvents": []'),
    "a repeated top-level key": kineto_text(GOOD, after='"schemaVersion": 2'),
    "an array of objects after the events": kineto_text(GOOD, after='"x": [\n  {"a": 1}\n  ]'),
    "nothing after the events": kineto_text(GOOD, after=""),
    "events at no indentation": kineto_text(GOOD, indent=""),
    "metadata only": kineto_text([{"ph": "M", "name": "process_name", "pid": 1}] * 3),
    "one event": kineto_text(GOOD[:1]),
    "truncated": kineto_text(GOOD)[:-40],
    "CRLF": kineto_text(GOOD).replace("\n", "\r\n"),
    "byte-order mark": "\ufeff" + kineto_text(GOOD),
    "traceEvents in a string first": kineto_text(GOOD).replace(
        '"schemaVersion": 1', '"note": "\\"traceEvents\\": [\\n  {", "schemaVersion": 1'
    ),
    "trailing garbage": kineto_text(GOOD) + "x",
}


@pytest.mark.parametrize("gz", [True, False])
@pytest.mark.parametrize("chunk", [1, 3, 8192])
@pytest.mark.parametrize("case", list(CASES))
def test_pieces_fail_and_succeed_as_the_skim_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str, chunk: int, gz: bool
) -> None:
    text = CASES[case].encode("utf-8", "surrogateescape")
    one, two, _ = by_pieces_and_skimmed(text, tmp_path, monkeypatch, chunk, gz)
    assert_same_either_way(one, two)


def test_pieces_are_used_with_any_number_of_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The parallel path shares out pieces too (skimmed events only for other layouts)."""
    from nbprof.trace import forked

    for workers in ("1", "2"):
        monkeypatch.setenv(forked.WORKERS_ENV, workers)
        assert reader._piece_bytes() == reader.CHUNK * reader._EVENT_BYTES


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(range(len(GOOD))), min_size=1, max_size=12),
    st.integers(1, 40),
    st.sampled_from(["},\n  {", "}\n  ]", "\n", ",", "]", "{", '"']),
)
def test_pieces_on_damaged_text_match_the_skim(order: list[int], at: int, insert: str) -> None:
    """Text cut or spliced at some event boundary reads (or fails) the same either way."""
    import tempfile

    text = kineto_text([GOOD[i] for i in order])
    cut = text.find("traceEvents") + at * 37 % max(1, len(text) - text.find("traceEvents"))
    text = text[:cut] + insert + text[cut:]
    with tempfile.TemporaryDirectory() as d, pytest.MonkeyPatch.context() as m:
        one, two, _ = by_pieces_and_skimmed(text, Path(d), m, 2, True)
        assert_same_either_way(one, two)


# -- a small file on one line: its event array is one piece -------------------------------


def one_line_text(events: list[Any], *, before: str = '"schemaVersion": 1', after: str = "") -> str:
    """A trace as ``json.dump`` writes it: everything on one line."""
    tail = f", {after}" if after else ""
    head = f"{before}, " if before else ""
    return "{" + head + '"traceEvents": [' + ", ".join(
        e if isinstance(e, str) else json.dumps(e) for e in events
    ) + "]" + tail + "}"  # fmt: skip


ONE_LINE_CASES = {
    "good": one_line_text(GOOD, after='"traceName": "t"'),
    "good, metadata after only": one_line_text(GOOD, before="", after='"x": [1, {"a": [2]}]'),
    "the same start twice across chunks": one_line_text(
        # One chunk puts CPU annotations first; chunks of one event keep the file's order.
        [_x("gpu_user_annotation", "g", 100), _x("user_annotation", "a", 100), *GOOD]
    ),
    "bad args type": one_line_text([*GOOD, BAD_EVENT, *GOOD]),
    "bad field type": one_line_text([*GOOD, dict(GOOD[0], pid=[1]), *GOOD]),
    "negative duration": one_line_text([*GOOD, _x("kernel", "k", 5, -1), *GOOD]),
    "float timestamps later": one_line_text([*GOOD, _x("cpu_op", "f", 123.4567), *GOOD]),
    "a string timestamp": one_line_text([*GOOD, _x("cpu_op", "f", "12"), *GOOD]),
    "no ts": one_line_text([*GOOD, {"ph": "X", "cat": "cpu_op", "name": "n", "dur": 1}]),
    "bad UTF-8 in a name": one_line_text([*GOOD, *GOOD]).replace("gemm", "g\udcffm"),
    "an event that is no object": one_line_text([*GOOD, "[1]", *GOOD]),
    "duplicate traceEvents": one_line_text(GOOD, after='"traceEvents": []'),
    "duplicate traceEvents, the empty one first": one_line_text(GOOD, before='"traceEvents": []'),
    "a repeated top-level key": one_line_text(GOOD, after='"schemaVersion": 2'),
    "traceEvents nested first": one_line_text(GOOD, before='"m": {"traceEvents": [1]}'),
    "traceEvents not an array": '{"traceEvents": {"a": 1}}',
    "no events": one_line_text([]),
    "blank event array": '{"traceEvents": [  ]}',
    "metadata only": one_line_text([{"ph": "M", "name": "process_name", "pid": 1}] * 3),
    "one event": one_line_text(GOOD[:1]),
    "truncated": one_line_text(GOOD)[:-40],
    "trailing garbage": one_line_text(GOOD) + "x",
    "byte-order mark": "\ufeff" + one_line_text(GOOD),
    "baseTimeNanoseconds": one_line_text(GOOD, after='"baseTimeNanoseconds": 1700000000000000000'),
}


@pytest.mark.parametrize("big", [False, True])
@pytest.mark.parametrize("gz", [True, False])
@pytest.mark.parametrize("chunk", [1, 3, 8192])
@pytest.mark.parametrize("case", list(ONE_LINE_CASES))
def test_one_line_file_reads_as_the_skim_reads(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    case: str,
    chunk: int,
    gz: bool,
    big: bool,
    events_path: str,
) -> None:
    """A file not laid out as Kineto writes it is decoded as one piece, and tabulated a
    chunk at a time: the same trace, rows in the same order, or the same error. One
    bigger than a piece is so decoded by the scanner only (where it is built), else
    skimmed."""
    text = ONE_LINE_CASES[case].encode("utf-8", "surrogateescape")
    piece_bytes = 64 if big else 1 << 20
    one, two, pieces = by_pieces_and_skimmed(text, tmp_path, monkeypatch, chunk, gz, piece_bytes)
    assert_same_either_way(one, two)
    if case.startswith("good"):
        assert not isinstance(one, str) and len(one.kernels) == 2
        assert pieces == (0 if big and events_path == "python" else 1)
