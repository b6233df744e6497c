"""The collectives table (``comms``) on a hand-written trace: which rows it holds and how
each arg's value is read, whatever JSON type the trace gives it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nbprof.trace import read
from nbprof.trace import reader as rd

COMM = {
    "Collective name": "allreduce",
    "Process Group Name": "0",
    "Process Group Ranks": [0, 1],
    "Group size": 2,
    "Seq": 3,
    "In msg nelems": 1024,
    "Out msg nelems": 1024,
    "dtype": "Float",
}


def x(cat: str, name: str, ts: int, dur: int, tid: int = 1, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip


def events() -> list[dict[str, Any]]:
    """Collective records among plain ops and kernels; ``i`` makes each one's times unique."""
    out: list[dict[str, Any]] = []
    for i in range(4):
        t = 1000 * i
        out += [
            x("cpu_op", "aten::add", t, 5),
            # A different JSON type in each arg from one record to the next.
            x(
                "cpu_op",
                "record_param_comms",
                t + 10,
                50,
                **{
                    **COMM,
                    "Seq": [3, None, 2**70, True][i],
                    "Group size": [2, "4", 2.0, None][i],
                    "Collective name": ["allreduce", None, 7, {"a": 1}][i],
                },
            ),
            x("user_annotation", "nccl:all_reduce", t + 20, 30, tid=2),
            x("user_annotation", "my_region", t + 21, 3, tid=2),
            x(
                "kernel",
                "ncclDevKernel_AllReduce",
                t + 40,
                100,
                tid=7,
                device=0,
                stream=7,
                correlation=i,
                **COMM,
            ),
            x("kernel", "ncclDevKernel_NoMetadata", t + 45, 10, tid=7, device=0, stream=7),
            x("kernel", "gemm", t + 50, 10, tid=7, device=0, stream=7),
        ]
    return out


@pytest.fixture(params=[4, 1 << 13], ids=["chunks of 4 events", "one chunk"])
def comms(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(rd, "CHUNK", request.param)
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": events()}))
    return read(p).comms


def test_rows_are_the_collective_records_with_their_own_times(comms: Any) -> None:
    # Per round: the op, the annotation and the kernel with metadata; the kernel without
    # any collective metadata and the other ops, annotations and kernels are no records.
    got = comms.sort_values(["ts", "source"]).reset_index(drop=True)
    assert len(got) == 3 * 4
    assert got["source"].tolist() == ["op", "annotation", "kernel"] * 4
    assert got["name"].tolist() == [
        "record_param_comms", "nccl:all_reduce", "ncclDevKernel_AllReduce"] * 4  # fmt: skip
    # ts relative to the first event (ts 0): 10, 20, 40 after each round's start.
    assert got["ts"].tolist() == [
        t + d for t in (0.0, 1000.0, 2000.0, 3000.0) for d in (10, 20, 40)
    ]
    assert got["dur"].tolist() == [50.0, 30.0, 100.0] * 4
    assert got["tid"].tolist() == [1, 2, 7] * 4
    assert got["device"].tolist() == ["", "", "0"] * 4
    kern = got[got["source"] == "kernel"]
    assert kern["correlation"].tolist() == [0, 1, 2, 3]
    assert (kern["collective"] == "allreduce").all() and (kern["seq"] == 3).all()
    assert kern["pg_ranks"].tolist() == ["[0,1]"] * 4


def test_each_arg_is_read_whatever_its_json_type(comms: Any) -> None:
    ops = comms[comms["source"] == "op"].sort_values("ts")
    # An int as is; null, an int beyond int64, a boolean: unknown (-1).
    assert ops["seq"].tolist() == [3, -1, -1, -1]
    # Numeric text and a whole float are numbers; null is unknown.
    assert ops["group_size"].tolist() == [2, 4, 2, -1]
    # Text as is, null as "", a number as its text, an object as its JSON.
    assert ops["collective"].tolist() == ["allreduce", "", "7", '{"a":1}']
    assert (ops["pg"] == "0").all() and (ops["dtype"] == "Float").all()
    assert (ops["in_nelems"] == 1024).all() and (ops["correlation"] == -1).all()
    ann = comms[comms["source"] == "annotation"]
    assert (ann["seq"] == -1).all() and (ann["collective"] == "").all()
