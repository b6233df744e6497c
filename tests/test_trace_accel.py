"""The C accelerator reads exactly what the pure path reads, and leaves it the rest.

Every case loads one file twice, with the accelerator (``NBPROF_ACCEL=1``) and without it,
and compares the whole trace (every table, bit for bit) or the error message. Cases the
accelerator takes are also checked to have been read by it, so that agreement is not the
pure path agreeing with itself; cases it must leave (text it does not read the same way)
are checked to have been left. Without it, one warning says so.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbprof
from nbprof.trace import accel
from nbprof.trace import decode as dec
from nbprof.trace import tables as tb
from nbprof.trace.events import ArgSpans
from tests.conftest import corpus_params
from tests.test_trace_fastpaths import GOOD, assert_same_either_way, kineto_text, read_each_way

built = pytest.mark.skipif(accel._accel is None, reason="the C accelerator is not built")


def test_the_accelerator_is_built_where_there_is_a_compiler() -> None:
    # pip builds it with the package; without a compiler the install still works, slower.
    if shutil.which("cc") or shutil.which("gcc"):
        assert accel._accel is not None


def test_without_the_accelerator_one_warning_says_how_much_slower(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(accel, "_accel", None)
    monkeypatch.setattr(accel, "_said", False)
    p = write(tmp_path, GOOD)
    with caplog.at_level("INFO", logger="nbprof.trace.accel"):
        first = nbprof.trace.read(p, progress=False)
        nbprof.trace.read(p, progress=False)
    said = [r for r in caplog.records if r.name == "nbprof.trace.accel"]
    assert [r.levelname for r in said] == ["WARNING"]
    assert f"about {accel.PURE_SLOWDOWN:.1f}x as slow" in said[0].getMessage()
    assert "not built" in said[0].getMessage()
    monkeypatch.undo()
    if accel._accel is not None:
        from tests.test_trace_cache import assert_same

        assert_same(first, nbprof.trace.read(p, progress=False))


def test_turned_off_on_purpose_it_says_so_once_and_quietly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(accel.ENV, "0")
    monkeypatch.setattr(accel, "_said", False)
    with caplog.at_level("INFO", logger="nbprof.trace.accel"):
        nbprof.trace.read(write(tmp_path, GOOD), progress=False)
        nbprof.trace.read(write(tmp_path, GOOD), progress=False)
    said = [r for r in caplog.records if r.name == "nbprof.trace.accel"]
    assert [r.levelname for r in said] == ["INFO"]
    assert "NBPROF_ACCEL=0" in said[0].getMessage()


def record_answers(
    monkeypatch: pytest.MonkeyPatch, module: Any, name: str, when: Any = lambda: True
) -> list[bool]:
    """What each call of ``module.name`` answers from now on, while ``when()`` holds:
    True for a result, False for None (left to the other path)."""
    answers: list[bool] = []
    real = getattr(module, name)

    def recording(*args: Any) -> Any:
        got = real(*args)
        if when():
            answers.append(got is not None)
        return got

    monkeypatch.setattr(module, name, recording)
    return answers


def read_both(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any, list[bool]]:
    """(trace or error text) with the accelerator and without it, and what each scan of a
    piece answered (True: read; False: left to the pure path)."""
    answers = record_answers(monkeypatch, accel, "events")
    one, two = read_each_way(path, monkeypatch, accel.ENV)
    return one, two, answers


def write(tmp_path: Path, events: list[Any], name: str = "t.json") -> Path:
    p = tmp_path / name
    p.write_text(kineto_text(events), encoding="utf-8")
    return p


def _with(event: str) -> list[Any]:
    """The GOOD events with one more, written as given (JSON text, laid out by Kineto's
    indentation of its first line only)."""
    return [*GOOD, event]


# Events the accelerator reads itself: each must give exactly the Python path's trace.
TAKEN = {
    "escaped name": r'{"ph": "X", "cat": "cpu_op", "name": "a\"b\\c\u00e9\n", "pid": 1, '
    r'"tid": 2, "ts": 120, "dur": 1}',
    "unicode name": '{"ph": "X", "cat": "cpu_op", "name": "défaut ∑ 🙂", "pid": 1, "tid": 2, '
    '"ts": 120, "dur": 1}',
    "template name": '{"ph": "X", "cat": "kernel", "name": "void k<float, 4>(T*)", "pid": 0, '
    '"tid": 7, "ts": 140, "dur": 1, "args": {"device": 0, "stream": 7, "correlation": 99}}',
    "numeric text tid": '{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": "2", '
    '"ts": 120, "dur": 1}',
    "negative numeric text pid": '{"ph": "X", "cat": "cpu_op", "name": "op", "pid": "-3", '
    '"tid": 2, "ts": 120, "dur": 1}',
    "text pid and tid": '{"ph": "X", "cat": "cpu_op", "name": "op", "pid": "Spans", '
    '"tid": "PyTorch Profiler", "ts": 120, "dur": 1}',
    "text tid with spaces": '{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, '
    '"tid": " 25 ", "ts": 120, "dur": 1}',
    "decimal ts": '{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 2, '
    '"ts": 120.123456, "dur": 1}',
    "short decimal ts": '{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 2, '
    '"ts": 120.5, "dur": 1}',
    "no ts (metadata)": '{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, '
    '"args": {"name": "python"}}',
    "decimal dur": '{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 2, '
    '"ts": 120, "dur": 0.1}',
    "long decimal dur": '{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 2, '
    '"ts": 120, "dur": 123456789.123456789}',
    "exponent dur": '{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 2, '
    '"ts": 120, "dur": 1.5e2}',
    "negative zero dur": '{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 2, '
    '"ts": 120, "dur": -0}',
    "no args": '{"ph": "X", "cat": "cuda_runtime", "name": "cudaMalloc", "pid": 1, '
    '"tid": 2, "ts": 120, "dur": 1}',
    "null args": '{"ph": "i", "cat": "x", "name": "n", "pid": 1, "tid": 2, "ts": 120, '
    '"args": null}',
    "nested args": '{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 2, '
    '"ts": 120, "dur": 1, "args": {"Input Dims": [[1, [2, {"a": [true, false, null]}]]], '
    '"s": "x\\"y", "f": -1.5e-3}}',
    "keys in another order": '{"dur": 3, "args": {"correlation": 8}, "ts": 111, "tid": 2, '
    '"pid": 1, "name": "cudaLaunchKernel", "cat": "cuda_runtime", "ph": "X"}',
    "repeated key": '{"ph": "X", "cat": "cpu_op", "name": "a", "name": "b", "pid": 1, '
    '"tid": 2, "ts": 120, "dur": 1}',
    "id forms": '{"ph": "s", "cat": "ac2g", "name": "ac2g", "id": "0x7", "pid": 1, '
    '"tid": 2, "ts": 110}',
    "null id": '{"ph": "i", "cat": "x", "name": "n", "id": null, "pid": 1, "tid": 2, "ts": 110}',
    "unknown category and phase": '{"ph": "Q", "cat": "mystery", "name": "n", "pid": 1, '
    '"tid": 2, "ts": 110, "dur": 1}',
    "empty event": "{}",
    "negative duration (an error)": '{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, '
    '"tid": 2, "ts": 120, "dur": -1.5}',
    "absurd duration (an error)": '{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, '
    '"tid": 2, "ts": 120, "dur": 1e300}',
    "kernel args of the wrong type (an error)": '{"ph": "X", "cat": "kernel", "name": "k", '
    '"pid": 0, "tid": 7, "ts": 140, "dur": 1, "args": {"correlation": "seven"}}',
    "duration event without ts (an error)": '{"ph": "X", "cat": "cpu_op", "name": "op", '
    '"pid": 1, "tid": 2, "dur": 1}',
}


def _kernel(args: str) -> str:
    return (
        '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 140, "dur": 1, '
        '"args": ' + args + "}"
    )


def _copy(args: str) -> str:
    return (
        '{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "pid": 0, '
        '"tid": 7, "ts": 150, "dur": 1, "args": ' + args + "}"
    )


def _op(args: str) -> str:
    return (
        '{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 2, "ts": 120, '
        '"dur": 1, "args": ' + args + "}"
    )


# Args the accelerator's fields read (the columns made from them, not from structs).
FIELDS_TAKEN = {
    "launch dimensions": _kernel(
        '{"grid": [], "block": [0, 1099511627776, 1099511627776], "correlation": null}'
    ),
    "overflowing dimensions": _kernel('{"grid": [2147483648, 2147483648, 4], "block": 5}'),
    "18-digit scalar dimension": _kernel('{"grid": 999999999999999999, "block": -3}'),
    "numbers of either kind": _kernel(
        '{"registers per thread": 32.5, "shared memory": 1e3, "blocks per SM": 3, '
        '"est. achieved occupancy %": 12, "device": null, "stream": null}'
    ),
    "numbers past the bounds": _kernel(
        '{"registers per thread": 5e18, "est. achieved occupancy %": -1e300}'
    ),
    "a repeated key": _kernel('{"correlation": 1, "correlation": 7, "device": 1}'),
    "memcpy kind as a number": _copy('{"kind": 3, "bytes": 8, "device": 0}'),
    "op shapes of any kind": _op(
        '{"Input Dims": [[1, 2], [], 3.5e999], "Input type": {"a": "b"}, "External id": 4, '
        '"flops": 12}'
    ),
    "op shapes with escapes": _op('{"Input Dims": "a\\u00e9\\n", "Input type": null}'),
}

# Args the accelerator's fields leave to the structs (which read them, or word the error).
FIELDS_LEFT = {
    "a device as text (ROCm)": _kernel('{"device": "0", "correlation": 3}'),
    "memcpy kind as text (ROCm)": _copy('{"kind": "HtoD", "bytes": 8.5, "device": 0}'),
    "memcpy kind unknown": _copy('{"kind": "sideways", "bytes": null}'),
    "memset kind as text": _copy('{"kind": "HtoD"}').replace("gpu_memcpy", "gpu_memset"),
    "a float correlation (an error)": _kernel('{"correlation": 3.5}'),
    "a huge correlation": _kernel('{"correlation": 92233720368547758080}'),
    "a stream past 2**62": _kernel('{"stream": 4611686018427387905, "device": 0}'),
    "a 19-digit dimension": _kernel('{"grid": 4611686018427387904, "block": -3}'),
    "a float in the dimensions (an error)": _kernel('{"grid": [1, 2.5, 1]}'),
    "nested dimensions (an error)": _kernel('{"grid": [[1], 2, 1]}'),
    "flops not finite (an error)": _op('{"flops": 1e999}'),
    "text flops (an error)": _op('{"flops": "many"}'),
    "args not an object (an error)": _op("[1]"),
    "an escaped key": _op('{"External \\u0069d": 4}'),
}


@built
@pytest.mark.parametrize(
    ("event", "by_fields"),
    [pytest.param(e, True, id=k) for k, e in FIELDS_TAKEN.items()]
    + [pytest.param(e, False, id=k) for k, e in FIELDS_LEFT.items()],
)
def test_args_the_fields_read_or_leave_to_the_structs(
    event: str, by_fields: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = record_answers(monkeypatch, accel, "fields")
    one, two, answers = read_both(write(tmp_path, _with(event)), monkeypatch)
    assert answers and all(answers)
    if by_fields:
        assert reads and all(reads)
        assert not isinstance(one, str)
    else:
        assert False in reads
    assert_same_either_way(one, two)


# One JSON value of each tag the accelerator gives.
_SAMPLES = {
    accel.ABSENT: None,
    accel.INT: "7",
    accel.FLOAT: "7.5",
    accel.STR: '"7"',
    accel.NULL: "null",
    accel.BOOL: "true",
    accel.INTS: "[1, 2, 3]",
    accel.ARRAY: "[1.5]",
    accel.OBJECT: "{}",
    accel.OTHER: "1e999",
}


@pytest.mark.parametrize("kind", list(tb._FIELDS), ids=lambda k: k.__name__)
def test_what_the_fields_read_the_structs_take(kind: type) -> None:
    # The accelerator's columns are used only where the struct takes the value as it is.
    for attr, (key, allowed) in tb._FIELDS[kind].items():
        for tag, value in _SAMPLES.items():
            if tag not in allowed or value is None:
                continue
            raw = msgspec.Raw(b'{"' + key + b'": ' + value.encode() + b"}")
            assert dec.decode_args([raw], kind, "t", np.arange(1)), (attr, tag)


# Text the accelerator leaves to the Python path, which reads it or words the error.
LEFT = {
    "ts as text": '{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 2, '
    '"ts": "120", "dur": 1}',
    "ts with an exponent": '{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 2, '
    '"ts": 1.2e2, "dur": 1}',
    "negative ts": '{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 2, '
    '"ts": -5, "dur": 1}',
    "null ts": '{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 2, "ts": null, '
    '"dur": 1}',
    "ts past the bound": '{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 2, '
    '"ts": 9000000000000001, "dur": 1}',
    "pid beyond int64": '{"ph": "X", "cat": "cpu_op", "name": "op", "pid": '
    '92233720368547758070, "tid": 2, "ts": 120, "dur": 1}',
    "float pid": '{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1.0, "tid": 2, '
    '"ts": 120, "dur": 1}',
    "name as a number": '{"ph": "X", "cat": "cpu_op", "name": 5, "pid": 1, "tid": 2, '
    '"ts": 120, "dur": 1}',
    "null dur": '{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 2, "ts": 120, '
    '"dur": null}',
    "escaped key": '{"ph": "X", "cat": "cpu_op", "n\\u0061me": "op", "pid": 1, "tid": 2, '
    '"ts": 120, "dur": 1}',
    "escaped category": '{"ph": "X", "cat": "cpu\\u005fop", "name": "op", "pid": 1, '
    '"tid": 2, "ts": 120, "dur": 1}',
    "control character in a string": '{"ph": "X", "cat": "cpu_op", "name": "a\tb", '
    '"pid": 1, "tid": 2, "ts": 120, "dur": 1}',
    "leading zero": '{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 01, "tid": 2, '
    '"ts": 120, "dur": 1}',
    "bad literal": '{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 2, '
    '"ts": 120, "dur": 1, "args": {"x": nul}}',
    "trailing comma": '{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 2, '
    '"ts": 120, "dur": 1,}',
    "id as an object": '{"ph": "s", "cat": "ac2g", "name": "ac2g", "id": {}, "pid": 1, '
    '"tid": 2, "ts": 110}',
    "deep args": '{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 2, '
    '"ts": 120, "dur": 1, "args": {"a": ' + "[" * 70 + "]" * 70 + "}}",
    "an event that is not an object": "[1, 2]",
}


@built
@pytest.mark.parametrize(
    ("event", "scanned"),
    [pytest.param(e, True, id=k) for k, e in TAKEN.items()]
    + [pytest.param(e, False, id=k) for k, e in LEFT.items()],
)
def test_events_the_scanner_reads_or_leaves_to_python(
    event: str, scanned: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two, answers = read_both(write(tmp_path, _with(event)), monkeypatch)
    if scanned:
        assert answers and all(answers)
    else:
        # Invalid JSON may be refused before any piece is read: then nothing was scanned.
        assert not any(answers)
    assert_same_either_way(one, two)


@built
def test_invalid_utf8_is_left_to_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for i, where in enumerate(("name", "cat", "tid", "id")):
        p = tmp_path / f"bad{i}.json"
        text = kineto_text(
            _with(
                f'{{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 2, "ts": 1, '
                f'"dur": 1, "{where}": "@@"}}'
            )
        )
        p.write_bytes(text.encode().replace(b"@@", b"\xff\xfe"))
        one, two, answers = read_both(p, monkeypatch)
        assert answers and not any(answers)
        assert_same_either_way(one, two)
        assert isinstance(one, str)


@built
def test_args_text_of_invalid_utf8_is_an_error_either_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A memset's args.kind is read as text by its struct, which checks the UTF-8 (found by
    # fuzzing: the fields once took such text, unread, and the load went on).
    p = tmp_path / "t.json"
    event = _copy('{"kind": "@@"}').replace("gpu_memcpy", "gpu_memset")
    p.write_bytes(kineto_text(_with(event)).encode().replace(b"@@", b"\xff"))
    one, two, answers = read_both(p, monkeypatch)
    assert answers and all(answers)
    assert_same_either_way(one, two)
    assert isinstance(one, str) and "Invalid UTF-8" in one


@built
def test_text_ids_get_the_codes_python_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Codes go to text ids in order of first use across kinds (kernels first, pid before
    # tid): an op's text tid seen in the file before a kernel's still gets the later code.
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "op", "pid": "host", "tid": "main", "ts": 1,
         "dur": 5, "args": {}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": "gpu", "tid": "stream 7", "ts": 2,
         "dur": 1, "args": {"device": 0, "correlation": 1}},
        {"ph": "X", "cat": "cpu_op", "name": "op2", "pid": "host", "tid": "stream 7",
         "ts": 3, "dur": 1, "args": {}},
    ]  # fmt: skip
    one, two, answers = read_both(write(tmp_path, events), monkeypatch)
    assert answers == [True]
    assert_same_either_way(one, two)
    # gpu, stream 7, host, main (-2, -3, -4, -5): the op on "stream 7" shares its code.
    assert one.cpu_ops["tid"].tolist() == [-5, -3]


@built
def test_many_pieces_and_a_gzip_file_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import nbprof.trace.reader as reader

    monkeypatch.setattr(reader, "PIECE_BYTES", 512)
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(kineto_text(GOOD * 40).encode()))
    one, two, answers = read_both(p, monkeypatch)
    assert len(answers) > 10 and all(answers)
    assert_same_either_way(one, two)


@built
@pytest.mark.parametrize("path", corpus_params())
def test_corpus_traces_read_the_same_with_the_scanner(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two, answers = read_both(path, monkeypatch)
    assert_same_either_way(one, two)
    if path.name.startswith(("hta__df_index_resolver", "kineto-tbplugin", "param__linear")):
        # Kineto's own layout, with text ids ("Spans", and tids as numeric text in the
        # older files): all of it is the accelerator's.
        assert answers and all(answers)


# -- generated events -----------------------------------------------------------------------

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
_IDS = st.one_of(
    st.integers(-(2**40), 2**40),
    st.integers(0, 99).map(str),
    st.sampled_from(["Spans", "PyTorch Profiler", "stream 7", "-4", " 5", ""]),
)


def _decimal(whole: int, places: int) -> st.SearchStrategy[str]:
    """Decimal text with 1 to ``places`` digits after the point."""
    return st.tuples(st.integers(0, whole), st.text("0123456789", min_size=1, max_size=places)).map(
        lambda t: f"{t[0]}.{t[1]}"
    )


_TS = st.one_of(
    st.integers(0, 2**53).map(str),
    _decimal(10**15, 6),
    st.sampled_from(["0.5", "12.0001", "3e2", "-1", '"7"']),
)
_DUR = st.one_of(
    st.integers(0, 10**12).map(str),
    st.floats(0, 1e12, allow_nan=False).map(repr),
    _decimal(10**9, 9),
    st.sampled_from(["-0.5", "1E3", "0.1", "null"]),
)
_CATS = st.sampled_from(
    [
        "cpu_op",
        "kernel",
        "cuda_runtime",
        "gpu_memcpy",
        "user_annotation",
        "ac2g",
        "python_function",
        "x",
    ]
)


@st.composite
def _event(draw: st.DrawFn) -> str:
    fields = {
        "ph": json.dumps(draw(st.sampled_from(["X", "X", "X", "i", "s", "f", "M"]))),
        "cat": json.dumps(draw(_CATS)),
        "name": json.dumps(draw(_TEXT), ensure_ascii=draw(st.booleans())),
        "pid": json.dumps(draw(_IDS)),
        "tid": json.dumps(draw(_IDS)),
        "ts": draw(_TS),
        "dur": draw(_DUR),
        "args": json.dumps(
            draw(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "correlation": st.one_of(st.integers(0, 9), st.none()),
                        "device": st.one_of(st.integers(0, 1), st.none(), st.just("0")),
                        "stream": st.one_of(st.integers(-1, 2**63), st.none()),
                        "External id": st.integers(0, 9),
                        "Input Dims": st.lists(st.lists(st.integers(0, 4), max_size=2)),
                        "grid": st.one_of(
                            st.lists(st.integers(-(2**40), 2**40), max_size=4),
                            st.integers(-(2**63), 2**63),
                            st.none(),
                        ),
                        "registers per thread": st.one_of(
                            st.integers(-(2**63), 2**63), st.floats(allow_nan=False), st.none()
                        ),
                        "est. achieved occupancy %": st.floats(allow_nan=False),
                        "bytes": st.one_of(st.integers(0, 2**64), st.floats(0, 1e20)),
                        "kind": st.one_of(st.sampled_from(["HtoD", "x"]), st.integers(0, 3)),
                        "flops": st.one_of(st.integers(0, 2**70), st.floats(0, 1e30)),
                    },
                )
            )
        ),
    }
    keys = draw(st.permutations(list(fields)))
    keep = [k for k in keys if k not in draw(st.sets(st.sampled_from(list(fields)), max_size=2))]
    return "{" + ", ".join(f'"{k}": {fields[k]}' for k in keep) + "}"


@built
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(events=st.lists(_event(), min_size=1, max_size=6))
def test_generated_events_read_the_same_either_way(
    events: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two, _ = read_both(write(tmp_path, [*GOOD[:3], *events]), monkeypatch)
    assert_same_either_way(one, two)


@built
def test_join_writes_absent_args_as_an_empty_object() -> None:
    data = b'{"a": 1} [2]'
    spans = ArgSpans(data, np.array([0, -1, 9]), np.array([8, -1, 12]))
    assert accel.join(spans) == b'[{"a": 1},{},[2]]'
    assert accel.join(spans.take(np.array([2, 1]))) == b"[[2],{}]"
    with pytest.raises(nbprof.TraceError, match="event 7: `args` should be an object"):
        dec.decode_args(spans, dec.RuntimeArgs, "t", np.array([5, 6, 7]))


@built
@pytest.mark.parametrize("text", [b'{}"device": 0}', b'{"device": 0} x', b'{"device": 0}}'])
def test_fields_refuse_text_after_the_object(text: bytes) -> None:
    # Found by fuzzing: an args span holding more than one object (never one the accelerator
    # gives) was read up to the first object's end.
    spans = ArgSpans(text, np.array([0]), np.array([len(text)]))
    assert accel.fields(spans, tb._FIELDS[dec.KernelArgs]) is None


_OUT_OF_MEMORY = """
import _testcapi
import numpy as np
from nbprof.trace import accel, tables as tb
lib = accel._accel
event = b'{"ph": "X", "cat": "kernel", "name": "k%d", "pid": 1, "tid": 2, "ts": %d, '
data = bytearray(b"[" + b",".join(
    event % (i % 7, i) + b'"dur": 1, "args": {"device": 0}}' for i in range(3000)) + b"]")
starts = np.arange(0, 3000 * 80, 80, dtype=np.int64)
stops = starts + 40
calls = [
    lambda: lib.scan(data, 1, len(data) - 1, tb.CAT_CODES, tb.PHASE_CODES, accel._unescape),
    lambda: lib.fields(data, starts, stops, (b"device", b"grid")),
    lambda: lib.texts(data, starts, stops),
]
failed = 0
for call in calls:
    for k in range(300):
        hit = False  # nothing allocated while allocations fail
        _testcapi.set_nomemory(k, 0)
        try:
            call()
        except MemoryError:
            hit = True
        finally:
            _testcapi.remove_mem_hooks()
        failed += hit
print(failed > 0, end="")
"""


@built
@pytest.mark.skipif(
    sys.implementation.name != "cpython" or not hasattr(__import__("_testcapi"), "set_nomemory"),
    reason="needs CPython's _testcapi.set_nomemory",
)
def test_running_out_of_memory_anywhere_is_one_clean_memory_error() -> None:
    # Every allocation, in turn, made to fail: a MemoryError each time, and nothing else
    # said (a bytearray freed half made once printed a SystemError beside it).
    done = subprocess.run(
        [sys.executable, "-c", _OUT_OF_MEMORY], capture_output=True, text=True, timeout=120
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "True", "")


def test_codes_are_the_tables_numbers() -> None:
    assert {k.decode(): v for k, v in tb.CAT_CODES.items()} == tb._CAT_NO
    assert {k.decode(): v for k, v in tb.PHASE_CODES.items()} == tb._PHASE_CODE


# -- the accelerator against msgspec on mutated text, piece by piece ---------------------------

_PIECE = (
    b'{"ph": "X", "cat": "kernel", "name": "void k<float>(int)", "pid": 0, "tid": 7, '
    b'"ts": 140, "dur": 1.5, "args": {"device": 0, "stream": 7, "correlation": 9, '
    b'"grid": [1, 2, 3], "registers per thread": 32}},\n  '
    b'{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": "1", "tid": "main", '
    b'"ts": 100.25, "dur": 50, "args": {"External id": 1, "Input Dims": [[2, 3], [3, 4]], '
    b'"Input type": ["float", "float"]}},\n  '
    b'{"ph": "s", "cat": "ac2g", "id": 7, "pid": 1, "tid": 2, "ts": 110, "name": "ac2g"}'
)


@st.composite
def _mutated(draw: st.DrawFn, text: bytes = _PIECE, ops: int = 4) -> bytes:
    """``text`` with a few bytes flipped, dropped or inserted, or cut short."""
    data = bytearray(text)
    for _ in range(draw(st.integers(1, ops))):
        at = draw(st.integers(0, len(data) - 1))
        op = draw(st.sampled_from(["flip", "drop", "insert", "insert", "cut"]))
        if op == "flip":
            data[at] = draw(st.integers(0, 255))
        elif op == "drop":
            del data[at : at + draw(st.integers(1, 8))]
        elif op == "insert":
            data[at:at] = draw(st.sampled_from(_INSERTS))
        else:
            del data[at:]
        if not data:
            data = bytearray(b"{")
    return bytes(data)


_INSERTS = [b'"', b"\\", b"{", b"}", b"[", b"]", b",", b":", b"\x00", b"\xff", b"-", b"e9", b".",
            b" ", b"\\u00", b"null", b"0", b"9" * 19, b".5", b"e400", b'"x"', b"[]", b"[1, 2.5]",
            b"true", b"{}"]  # fmt: skip


def _pure_piece(data: bytes) -> Any:
    """The pure path's columns of the events ``data`` holds, or None when it fails."""
    buf = bytearray(b"[" + data + b"]")
    try:
        (cols,) = dec.events(
            buf, (1, len(data) + 1), 0, "t", dec.TsMode(), tb.CAT_NO, tb.PHASE_CODE
        )
    except (dec.Malformed, nbprof.TraceError):
        return None
    return cols


@built
@settings(max_examples=600, deadline=None)
@given(data=st.one_of(_mutated(), st.binary(max_size=64)))
def test_the_scanner_never_reads_what_msgspec_refuses(data: bytes) -> None:
    # On any bytes: no crash, and anything the accelerator reads, msgspec reads the same way
    # (the accelerator may leave more to it, never less).
    cols = accel.events(data, (0, len(data)), tb.CAT_CODES, tb.PHASE_CODES)
    if cols is None:
        return
    want = _pure_piece(data)
    assert want is not None, data
    assert cols.codes.tolist() == want.codes.tolist()
    assert cols.name.texts() == want.name.texts()

    # Text of an optional "-" and up to 18 digits is its number (as tables.Ids reads
    # it); other text is kept for the tables to code.
    def number(v: int | str) -> int | str:
        return int(v) if isinstance(v, str) and re.fullmatch(r"-?[0-9]{1,18}", v) else v

    everything = np.arange(len(cols))
    for which in ("pid", "tid", "id"):
        assert cols.ids(which, everything) == [number(p) for p in want.ids(which, everything)]
    assert cols.ts.tolist() == want.ts.tolist()
    assert cols.dur.tolist() == want.dur.tolist()
    spans = cols.args
    assert isinstance(spans, ArgSpans) and isinstance(want.args, list)
    assert [
        bytes(data[a:b]) if a >= 0 else b"{}" for a, b in zip(spans.start, spans.stop, strict=True)
    ] == [bytes(a) for a in want.args]


@built
@settings(max_examples=300, deadline=None)
@given(data=st.one_of(_mutated(), st.binary(max_size=64)), n=st.integers(0, 4))
def test_fields_and_texts_take_any_bytes(data: bytes, n: int) -> None:
    # Spans anywhere in the buffer (the accelerator gives whole args objects; these need not
    # be): no crash, None or a tag per span and key.
    starts = np.array([min(i * 7, len(data)) for i in range(n)], np.int64)
    stops = np.array([len(data)] * n, np.int64)
    lib = accel._accel
    assert lib is not None
    got = lib.fields(data, starts, stops, (b"device", b"grid", b"Input Dims"))
    assert got is None or all(len(f[0]) == n for f in got)
    codes, distinct = lib.texts(data, starts, stops)
    assert len(codes) == 4 * n and len(distinct) <= n
    assert lib.join(data, starts, stops).startswith(b"[")


_ARGS = (
    b'{"device": 0, "stream": 7, "correlation": 9, "grid": [1, 2, 3], "block": [128, 1, 1], '
    b'"registers per thread": 32, "shared memory": 0, "blocks per SM": 1.5, '
    b'"est. achieved occupancy %": 50, "bytes": 1024, "kind": "HtoD", "External id": 4, '
    b'"flops": 1e9, "Input Dims": [[2, 3]], "Input type": ["float"]}'
)


@built
@settings(max_examples=400, deadline=None)
@given(texts=st.lists(_mutated(_ARGS, 3), min_size=1, max_size=3))
def test_args_fields_agree_with_the_structs_on_mutated_args(texts: list[bytes]) -> None:
    data = b" ".join(texts)
    starts, at = [], 0
    for t in texts:
        starts.append(at)
        at += len(t) + 1
    spans = ArgSpans(data, np.array(starts), np.array(starts) + [len(t) for t in texts])
    idx = np.arange(len(texts))
    pid, tid = np.arange(len(texts)) + 100, np.arange(len(texts)) + 200
    for kind, spec in tb._FIELDS.items():
        got = accel.fields(spans, spec)
        if got is None:
            continue
        # The structs take whatever the fields read, and give the same columns.
        want = tb._Structs(dec.decode_args(spans, kind, "t", idx))
        for attr in spec:
            if attr in ("device",):
                assert got.device(attr, pid).texts() == want.device(attr, pid).texts()
            elif attr == "stream":
                assert (
                    got.stream(attr, tid, tb.Ids()).tolist()
                    == want.stream(attr, tid, tb.Ids()).tolist()
                )
            elif attr in ("grid", "block"):
                assert got.dims(attr).tolist() == want.dims(attr).tolist()
            elif attr == "kind":
                assert (
                    got.memcpy_kind(attr, tb._MEMCPY_KINDS).texts()
                    == want.memcpy_kind(attr, tb._MEMCPY_KINDS).texts()
                )
            elif attr in ("input_dims", "input_types"):
                assert got.raw_texts(attr).texts() == want.raw_texts(attr).texts()
            else:
                for dtype, missing in ((np.int64, -1), (np.float64, np.nan)):
                    np.testing.assert_array_equal(
                        got.num(attr, dtype, missing), want.num(attr, dtype, missing)
                    )
