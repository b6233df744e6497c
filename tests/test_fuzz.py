"""Property-based fuzzing of the reader: mutated real traces give a Trace or a TraceError.

The seed is a small real trace from the corpus plus a sample of a larger one (so Kineto's
real key names and value shapes are what gets mutated); without the corpus, a hand-made
trace. Mutations: dropped keys, wrong types, negative and huge numbers, truncated bytes,
flipped bytes in the JSON and in its gzip stream; and, on the JSON text itself, structural
ones a dict cannot hold: deep nesting anywhere, repeated keys, the event array without its
closing bracket, absurd durations.
"""

from __future__ import annotations

import copy
import gzip
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbprof.errors import TraceError
from nbprof.trace import Trace, read
from nbprof.trace.model import TABLES


def _hand_made() -> dict[str, Any]:
    t0 = 1_700_000_000_000_000
    ev = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
         "ts": t0, "dur": 100, "args": {}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t0 + 1,
         "dur": 50, "args": {"External id": 3, "Input Dims": [[2, 2], [2, 2]]}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": t0 + 2, "dur": 3, "args": {"correlation": 9}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": t0 + 10,
         "dur": 4, "args": {"device": 0, "stream": 7, "correlation": 9, "grid": [1, 2, 3],
                            "block": [32, 1, 1], "registers per thread": 32}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0,
         "tid": 7, "ts": t0 + 20, "dur": 2, "args": {"device": 0, "bytes": 64}},
        {"ph": "s", "id": 9, "pid": 1, "tid": 1, "ts": t0 + 2, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": 9, "pid": 0, "tid": 7, "ts": t0 + 10, "cat": "ac2g", "name": "ac2g"},
    ]  # fmt: skip
    return {"deviceProperties": [{"id": 0, "name": "NVIDIA A100", "numSms": 108}],
            "distributedInfo": {"rank": 0}, "traceEvents": ev}  # fmt: skip


def corpus_dir() -> Path | None:
    """The corpus folder, found as tests/conftest.py does (read at import time, before any
    fixture runs; importing ``conftest`` by name is ambiguous with tests/browser/)."""
    env = os.environ.get("NBPROF_TRACE_CORPUS")
    c = Path(env) if env else Path(__file__).resolve().parent.parent.parent / "shared" / "traces"
    return c if c.is_dir() and any(c.glob("*.json*")) else None


def _seed() -> dict[str, Any]:
    d = corpus_dir()
    if d is None:
        return _hand_made()
    small = sorted(d.glob("hta__critical_path_cuda_event_sync*.json.gz"))
    large = sorted(d.glob("hta__negative_queue_length*.json.gz"))
    if not small:
        return _hand_made()
    with gzip.open(small[0], "rt") as f:
        doc = json.load(f)
    if large:
        # Every 400th event of a larger trace: more categories and arg shapes, still small.
        with gzip.open(large[0], "rt") as f:
            doc["traceEvents"] += json.load(f)["traceEvents"][::400]
    return doc


SEED = _seed()
SEED_BYTES = json.dumps(SEED).encode()
N_EVENTS = len(SEED["traceEvents"])

WRONG = st.one_of(
    st.none(), st.booleans(), st.text(max_size=5), st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.integers(-(2**70), 2**70), st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([-1, -1.5, 0, 2**63, 1e300, "12", "0x1", [1, 2, 3]]),
)  # fmt: skip
KEYS = ["ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "args"]
ARG_KEYS = ["device", "stream", "correlation", "grid", "block", "registers per thread",
            "shared memory", "blocks per SM", "est. achieved occupancy %", "bytes", "kind",
            "External id", "flops", "Input Dims", "Input type"]  # fmt: skip
TOP_KEYS = ["traceEvents", "deviceProperties", "distributedInfo", "baseTimeNanoseconds"]


@st.composite
def mutated_doc(draw: st.DrawFn) -> Any:
    doc = copy.deepcopy(SEED)
    for _ in range(draw(st.integers(1, 4))):
        what = draw(st.sampled_from(["drop", "wrong", "arg", "argdrop", "top", "negate"]))
        events = doc.get("traceEvents") if isinstance(doc, dict) else None
        if what == "top":
            key = draw(st.sampled_from(TOP_KEYS))
            if isinstance(doc, dict):
                if draw(st.booleans()):
                    doc.pop(key, None)
                else:
                    doc[key] = draw(WRONG)
            continue
        if not isinstance(events, list) or not events:
            continue
        i = draw(st.integers(0, len(events) - 1))
        ev = events[i]
        if not isinstance(ev, dict):
            continue
        if what == "drop":
            ev.pop(draw(st.sampled_from(KEYS)), None)
        elif what == "wrong":
            ev[draw(st.sampled_from(KEYS))] = draw(WRONG)
        elif what == "negate":
            for k in ("ts", "dur"):
                if isinstance(ev.get(k), (int, float)):
                    ev[k] = -ev[k] - 1
        else:
            args = ev.setdefault("args", {})
            if isinstance(args, dict):
                key = draw(st.sampled_from(ARG_KEYS))
                if what == "argdrop":
                    args.pop(key, None)
                else:
                    args[key] = draw(WRONG)
    return doc


def _check(p: Path) -> None:
    try:
        tr = read(p, progress=False)
    except TraceError as e:
        assert e.reason and str(p) in str(e)
        return
    assert isinstance(tr, Trace)
    for name, cols in TABLES.items():
        assert tuple(getattr(tr, name).columns[: len(cols)]) == cols


# Bounded and derandomized so the suite stays quick and CI cannot fail by luck; set
# NBPROF_FUZZ_EXAMPLES=5000 for a deeper, randomized run by hand.
_DEEP = "NBPROF_FUZZ_EXAMPLES" in os.environ
FAST = settings(
    max_examples=int(os.environ.get("NBPROF_FUZZ_EXAMPLES", "60")),
    derandomize=not _DEEP,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@FAST
@given(mutated_doc())
def test_mutated_structure(tmp_path: Path, doc: Any) -> None:
    p = tmp_path / "m.json"
    p.write_bytes(json.dumps(doc).encode())
    _check(p)


@FAST
@given(st.integers(0, len(SEED_BYTES)), st.lists(st.tuples(st.integers(0, 10**9),
       st.integers(0, 255)), max_size=4))  # fmt: skip
def test_truncated_and_flipped_json(tmp_path: Path, cut: int, flips: list[tuple[int, int]]) -> None:
    data = bytearray(SEED_BYTES[:cut])
    for pos, val in flips:
        if data:
            data[pos % len(data)] = val
    p = tmp_path / "b.json"
    p.write_bytes(bytes(data))
    _check(p)


GZ = gzip.compress(SEED_BYTES)


@FAST
@given(st.integers(0, len(GZ)), st.lists(st.tuples(st.integers(0, 10**9), st.integers(1, 255)),
       max_size=3))  # fmt: skip
def test_truncated_and_flipped_gzip(tmp_path: Path, cut: int, flips: list[tuple[int, int]]) -> None:
    data = bytearray(GZ[: max(cut, 2)])
    for pos, xor in flips:
        data[pos % len(data)] ^= xor
    p = tmp_path / "g.json.gz"
    p.write_bytes(bytes(data))
    _check(p)


def _text(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _object(pairs: list[tuple[str, str]]) -> str:
    """A JSON object from (key, value text) pairs, repeats kept."""
    return "{" + ",".join(f"{_text(k)}:{v}" for k, v in pairs) + "}"


@st.composite
def structural(draw: st.DrawFn) -> bytes:
    """The seed as JSON text, with the mutations only text can express."""
    events = [e for e in SEED["traceEvents"] if isinstance(e, dict)]
    events = [dict(e) for e in events[: draw(st.integers(1, min(len(events), 40)))]]
    top = [(k, _text(v)) for k, v in SEED.items() if k != "traceEvents"]
    ev_text = [[(k, _text(v)) for k, v in e.items()] for e in events]
    bare = False
    for _ in range(draw(st.integers(1, 3))):
        what = draw(st.sampled_from(["deep", "dup-top", "dup-event", "unclosed", "dur"]))
        i = draw(st.integers(0, len(ev_text) - 1))
        if what == "deep":
            depth = draw(st.integers(1, 3000))
            opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
            deep = opener * depth + "1" + closer * depth
            where = draw(st.sampled_from(["arg", "event-key", "top", "event"]))
            if where == "arg":
                ev_text[i].append(("args", '{"grid":' + deep + "}"))
            elif where == "event-key":
                ev_text[i].append((draw(st.sampled_from(["x", "ts", "dur", "name"])), deep))
            elif where == "top":
                top.append((draw(st.sampled_from(["meta", "distributedInfo"])), deep))
            else:
                ev_text.insert(i, [("deep", deep)])
        elif what == "dup-top":
            key = draw(st.sampled_from(["traceEvents", "schemaVersion", "deviceProperties"]))
            top.append((key, "[]" if key != "schemaVersion" else "2"))
        elif what == "dup-event":
            key = draw(st.sampled_from(["ts", "dur", "cat", "ph", "args"]))
            ev_text[i].append((key, _text(draw(WRONG))))
        elif what == "unclosed":
            bare = True
        else:
            dur = draw(st.sampled_from(["1e18", "1e300", "1e999", "9.1e15", "9e15", "-1e300"]))
            ev_text[i] = [(k, v) for k, v in ev_text[i] if k != "dur"] + [("dur", dur)]
    array = "[" + ",".join(_object(e) for e in ev_text)
    if bare:
        return (array + draw(st.sampled_from(["", ",", ",\n", "\n  "]))).encode()
    return _object([*top, ("traceEvents", array + "]")]).encode()


@FAST
@given(structural())
def test_structural_mutations(tmp_path: Path, data: bytes) -> None:
    p = tmp_path / "s.json"
    p.write_bytes(data)
    _check(p)


@pytest.mark.parametrize("gz", [False, True])
def test_structural_mutations_each_once(tmp_path: Path, gz: bool) -> None:
    """One of each, read plain and gzipped: the errors they must give, in words."""
    ev = _text(SEED["traceEvents"][0] if isinstance(SEED["traceEvents"][0], dict) else {})
    cases = {
        '{"traceEvents":[' + ev + '],"m":' + "[" * 3000 + "]" * 3000 + "}": "nested too deeply",
        '{"traceEvents":[' + ev + '],"traceEvents":[' + ev + "]}": "more than once",
        '{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1e300}]}': "duration",
    }
    for i, (text, words) in enumerate(cases.items()):
        p = tmp_path / (f"c{i}.json.gz" if gz else f"c{i}.json")
        p.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
        with pytest.raises(TraceError, match=words):
            read(p, progress=False)


def test_seed_itself_loads(tmp_path: Path) -> None:
    p = tmp_path / "seed.json"
    p.write_bytes(SEED_BYTES)
    assert read(p, progress=False).event_count == N_EVENTS


@pytest.mark.parametrize("cut", [1, 10, 100])
def test_tiny_prefixes_are_errors(tmp_path: Path, cut: int) -> None:
    p = tmp_path / "c.json"
    p.write_bytes(SEED_BYTES[:cut])
    with pytest.raises(TraceError):
        read(p)


@pytest.mark.parametrize("where", ["name", "args", "deviceProperties", "metadata"])
def test_invalid_utf8_inside_strings_is_caught(tmp_path: Path, where: str) -> None:
    """The skim leaves values raw, so bad UTF-8 inside a string must still be caught later:
    in a field nbprof reads it is a TraceError; in metadata the value is ignored with a note;
    in an ``args`` key nbprof does not read it is never decoded, so the trace loads."""
    doc = {
        "deviceProperties": [{"id": 0, "name": "GPU@", "numSms": 8}],
        "traceName": "T@",
        "traceEvents": [
            {"ph": "X", "cat": "kernel", "name": "k@", "pid": 0, "tid": 7, "ts": 10, "dur": 5,
             "args": {"device": 0, "stream": 7, "correlation": 1, "note": "a@"}},
        ],
    }  # fmt: skip
    marker = {"name": "k@", "args": "a@", "deviceProperties": "GPU@", "metadata": "T@"}[where]
    raw = json.dumps(doc).encode().replace(marker.encode(), marker[:-1].encode() + b"\xff")
    p = tmp_path / "u.json"
    p.write_bytes(raw)
    if where == "name":
        with pytest.raises(TraceError, match="not valid JSON"):
            read(p, progress=False)
        return
    tr = read(p, progress=False)
    if where == "args":
        assert tr.kernels["name"].tolist() == ["k@"] and not tr.notes
        return
    key = {"deviceProperties": "deviceProperties", "metadata": "traceName"}[where]
    assert tr.metadata[key] is None
    assert any(key in n and "ignored" in n for n in tr.notes), tr.notes
