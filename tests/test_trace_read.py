"""The trace reader on tiny hand-written traces: one variant of the format per test."""

from __future__ import annotations

import gzip
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import nbprof
from nbprof.trace import Trace, read
from nbprof.trace.model import TABLES, empty_table
from nbprof.trace.tables import vendor_of

T0 = 1_700_000_000_000_000  # an epoch timestamp in µs


def write(tmp_path: Path, doc: Any, name: str = "t.json") -> Path:
    p = tmp_path / name
    data = json.dumps(doc).encode()
    p.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return p


def x(cat: str, name: str, ts: float, dur: float, pid: int | str = 1, tid: int | str = 1,
      **args: Any) -> dict[str, Any]:  # fmt: skip
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip


PROPS = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85018279936,
          "computeMajor": 9, "computeMinor": 0, "numSms": 132,
          "maxThreadsPerMultiprocessor": 2048}]  # fmt: skip


def modern(t0: float = T0) -> dict[str, Any]:
    """A new-style Kineto trace: one step, a nested op launching a kernel, copies, a set."""
    return {
        "schemaVersion": 1,
        "deviceProperties": PROPS,
        "traceEvents": [
            {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
            x("user_annotation", "ProfilerStep#7", t0 + 0, 1000),
            x("cpu_op", "aten::linear", t0 + 10, 200, **{"External id": 5,
              "Input Dims": [[8, 16], [16, 16]], "Input type": ["float", "float"]}),
            x("cpu_op", "aten::addmm", t0 + 20, 100, **{"External id": 6, "flops": 4096.0}),
            x("cuda_runtime", "cudaLaunchKernel", t0 + 30, 5, correlation=11),
            x("cuda_runtime", "cudaMemcpyAsync", t0 + 150, 5, correlation=12),
            x("cuda_driver", "cuLaunchKernel", t0 + 400, 5, correlation=13),
            x("cuda_runtime", "cudaMemsetAsync", t0 + 500, 5, correlation=14),
            x("kernel", "sm90_xmma_gemm", t0 + 50, 20, pid=0, tid=7, device=0, stream=7,
              correlation=11, grid=[4, 2, 3], block=[128, 2, 1],
              **{"registers per thread": 96, "shared memory": 4096, "blocks per SM": 0.18,
                 "est. achieved occupancy %": 12}),
            x("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", t0 + 320, 10, pid=0, tid=7,
              device=0, stream=7, correlation=12, bytes=4096),
            x("kernel", "triton_poi_fused_0", t0 + 420, 3, pid=0, tid=7, device=0, stream=7,
              correlation=13, grid=[1, 1, 1], block=[128, 1, 1]),
            x("gpu_memset", "Memset (Device)", t0 + 510, 1, pid=0, tid=7, device=0, stream=7,
              correlation=14, bytes=512),
            x("gpu_user_annotation", "ProfilerStep#7", t0 + 50, 500, pid=0, tid=7),
            {"ph": "s", "id": 11, "pid": 1, "tid": 1, "ts": t0 + 30, "cat": "ac2g", "name": "ac2g"},
            {"ph": "f", "id": 11, "pid": 0, "tid": 7, "ts": t0 + 50, "cat": "ac2g", "name": "ac2g",
             "bp": "e"},
            x("python_function", "train.py(3): step", t0, 900),
        ],
    }  # fmt: skip


def test_modern_trace_fills_every_column(tmp_path: Path) -> None:
    tr = read(write(tmp_path, modern()))
    assert isinstance(tr, Trace)
    for name, cols in TABLES.items():
        frame = getattr(tr, name)
        assert tuple(frame.columns[: len(cols)]) == cols, name
    k = tr.kernels
    assert k["name"].tolist() == ["sm90_xmma_gemm", "triton_poi_fused_0"]
    first = k.iloc[0]
    assert first["grid"] == 4 * 2 * 3 and first["block"] == 128 * 2
    assert first["registers"] == 96 and first["shared_mem"] == 4096
    assert first["occupancy"] == 12 and first["blocks_per_sm"] == pytest.approx(0.18)
    assert first["device"] == "0" and first["stream"] == 7 and first["correlation"] == 11
    assert first["launch_name"] == "cudaLaunchKernel" and first["launch_ts"] == 30
    # The innermost op on the launching thread is aten::addmm (inside aten::linear).
    assert first["op"] == "aten::addmm"
    assert tr.cpu_ops.loc[first["op_index"], "name"] == "aten::addmm"
    second = k.iloc[1]
    assert second["launch_name"] == "cuLaunchKernel" and second["op"] == ""
    assert second["op_index"] == -1
    assert second["registers"] == -1 and math.isnan(second["occupancy"])

    m = tr.memcpy.iloc[0]
    assert (m["kind"], m["src"], m["dst"], m["bytes"]) == ("HtoD", "Pageable", "Device", 4096)
    assert m["launch_name"] == "cudaMemcpyAsync" and m["op"] == "aten::linear"
    s = tr.memset.iloc[0]
    assert s["bytes"] == 512 and s["launch_name"] == "cudaMemsetAsync"

    ops = tr.cpu_ops.set_index("name")
    assert ops.loc["aten::linear", "depth"] == 0 and ops.loc["aten::addmm", "depth"] == 1
    assert ops.loc["aten::linear", "external_id"] == 5
    assert json.loads(ops.loc["aten::linear", "input_dims"]) == [[8, 16], [16, 16]]
    assert json.loads(ops.loc["aten::linear", "input_types"]) == ["float", "float"]
    assert ops.loc["aten::addmm", "flops"] == 4096.0 and ops.loc["aten::addmm", "input_dims"] == ""

    assert tr.runtime["cat"].tolist() == ["cuda_runtime", "cuda_runtime", "cuda_driver",
                                          "cuda_runtime"]  # fmt: skip
    assert sorted(tr.annotations["on_gpu"].tolist()) == [False, True]
    assert tr.steps[["step", "ts", "dur"]].values.tolist() == [[7, 0, 1000]]
    d = tr.devices.iloc[0]
    assert (d["device"], d["vendor"], d["sm_count"], d["compute_capability"]) == (
        "0", "nvidia", 132, "9.0")  # fmt: skip
    assert d["total_memory"] == 85018279936 and d["max_threads_per_sm"] == 2048
    assert tr.origin_ns == T0 * 1000
    assert tr.event_count == 16
    assert tr.notes == []
    assert tr.counters.empty


def test_contract_dtypes(tmp_path: Path) -> None:
    tr = read(write(tmp_path, modern()))
    for name in TABLES:
        want = empty_table(name).dtypes
        got = getattr(tr, name).dtypes
        for col in TABLES[name]:
            # A text column's categories are its own values: the kind, not the dtype, is fixed.
            assert str(got[col]) == str(want[col]), (name, col, got[col], want[col])


def test_old_category_names_and_string_tids(tmp_path: Path) -> None:
    ev = [
        x("Operator", "ProfilerStep#5", T0, 500, pid=9, tid="9"),
        x("Operator", "aten::conv2d", T0 + 5, 100, pid=9, tid="9"),
        x("Runtime", "cudaLaunchKernel", T0 + 10, 4, pid=9, tid="9", correlation=3),
        x("Kernel", "volta_h884gemm", T0 + 30, 8, pid=0, tid="stream 7", device=0, stream=7,
          correlation=3, grid=[10, 1, 1], block=[256, 1, 1]),
        x("Memcpy", "Memcpy DtoH (Device -> Pinned)", T0 + 50, 2, pid=0, tid="stream 7",
          device=0, stream=7, correlation=4, bytes=8),
        x("Memset", "Memset (Device)", T0 + 60, 1, pid=0, tid="stream 7", device=0, stream=7,
          correlation=5, bytes=8),
    ]  # fmt: skip
    tr = read(write(tmp_path, {"traceEvents": ev}))
    assert len(tr.kernels) == 1 and len(tr.memcpy) == 1 and len(tr.memset) == 1
    k = tr.kernels.iloc[0]
    assert k["launch_name"] == "cudaLaunchKernel" and k["op"] == "aten::conv2d"
    assert tr.runtime["cat"].tolist() == ["cuda_runtime"]
    assert tr.runtime["tid"].tolist() == [9]
    # An old-style step written as an op is a step (and an annotation), not a CPU op.
    assert tr.cpu_ops["name"].tolist() == ["aten::conv2d"]
    assert tr.steps["step"].tolist() == [5]
    assert (tr.memcpy.iloc[0]["kind"], tr.memcpy.iloc[0]["dst"]) == ("DtoH", "Pinned")
    # No deviceProperties: the device seen in events still gets a row, with unknowns.
    d = tr.devices.iloc[0]
    assert (d["device"], d["name"], d["vendor"], d["sm_count"]) == ("0", "", "unknown", -1)


def test_base_time_and_relative_float_ns_timestamps(tmp_path: Path) -> None:
    base = 1_735_632_360_000_000_000
    doc = {"baseTimeNanoseconds": base, "traceEvents": [
        x("cpu_op", "aten::mm", 4203669604595.407, 10.5),
        x("kernel", "k", 4203669604600.001, 0.003, pid=0, tid=7, device=0, stream=7),
    ]}  # fmt: skip
    tr = read(write(tmp_path, doc))
    assert tr.origin_ns == base + 4203669604595407
    assert tr.kernels["ts"].iloc[0] == pytest.approx(4.594, abs=1e-9)
    assert tr.kernels["dur"].iloc[0] == pytest.approx(0.003)


def test_epoch_float_timestamps_keep_nanoseconds(tmp_path: Path) -> None:
    # 1712195495519695.812 µs has more digits than a float64 holds: parsed as a float it
    # would land on a multiple of 0.25 µs.
    raw = (b'{"traceEvents": ['
           b'{"ph":"X","cat":"kernel","name":"a","pid":0,"tid":7,"ts":1712195495519689.047,"dur":1},'
           b'{"ph":"X","cat":"kernel","name":"b","pid":0,"tid":7,"ts":1712195495519695.812,"dur":1}'
           b"]}")  # fmt: skip
    p = tmp_path / "ns.json"
    p.write_bytes(raw)
    tr = read(p)
    assert tr.origin_ns == 1712195495519689047
    assert tr.kernels["ts"].tolist() == [0.0, pytest.approx(6.765, abs=1e-9)]


def test_launch_found_through_flow_events_without_correlation(tmp_path: Path) -> None:
    ev = [
        x("cpu_op", "aten::add", T0, 50),
        x("cuda_runtime", "cudaLaunchKernelExC", T0 + 10, 5),
        x("kernel", "k", T0 + 40, 3, pid=0, tid=7, device=0, stream=7),
        {"ph": "s", "id": 99, "pid": 1, "tid": 1, "ts": T0 + 10, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": 99, "pid": 0, "tid": 7, "ts": T0 + 40, "cat": "ac2g", "name": "ac2g"},
    ]
    tr = read(write(tmp_path, {"traceEvents": ev}))
    k = tr.kernels.iloc[0]
    assert k["correlation"] == 99 and k["launch_name"] == "cudaLaunchKernelExC"
    assert k["launch_ts"] == 10 and k["op"] == "aten::add"
    assert any("flow events" in n for n in tr.notes)


def test_every_step_kept_including_a_partial_last_one(tmp_path: Path) -> None:
    ev = [x("user_annotation", f"ProfilerStep#{i}", T0 + 100 * i, 100) for i in (1, 2)]
    ev.append(x("user_annotation", "ProfilerStep#3", T0 + 300, 10))  # cut short at the end
    ev.append(x("cpu_op", "aten::relu", T0 + 305, 1))
    tr = read(write(tmp_path, {"traceEvents": ev}))
    assert tr.steps["step"].tolist() == [1, 2, 3]
    assert tr.steps["dur"].tolist() == [100, 100, 10]
    assert "no kernel events" in " ".join(tr.notes)


def test_no_steps_gives_an_empty_steps_table(tmp_path: Path) -> None:
    tr = read(write(tmp_path, modern()["traceEvents"][2:]))  # a bare array, no step
    assert tr.steps.empty and tuple(tr.steps.columns) == TABLES["steps"]
    assert tr.origin_ns == T0 * 1000  # the python_function event starts first


def test_amd_device_is_amd_and_claims_no_compute_capability(tmp_path: Path) -> None:
    props = [{"id": 0, "name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 0,
              "numSms": 104}]  # fmt: skip
    ev = [x("kernel", "Cijk_Alik", T0, 5, pid=2, tid=0, device=0, stream=0)]
    tr = read(write(tmp_path, {"deviceProperties": props, "traceEvents": ev}))
    d = tr.devices.iloc[0]
    assert (d["vendor"], d["compute_capability"], d["sm_count"]) == ("amd", "", 104)


@pytest.mark.parametrize(
    ("name", "vendor"),
    [("NVIDIA A100-SXM4-80GB", "nvidia"), ("Tesla V100-SXM2-32GB", "nvidia"),
     ("GeForce RTX 3090", "nvidia"), ("Quadro RTX 8000", "nvidia"), ("AMD Instinct MI250X", "amd"),
     ("Radeon Pro W7900", "amd"), ("Intel Data Center GPU Max", "unknown"), ("", "unknown")],
)  # fmt: skip
def test_vendor_from_name(name: str, vendor: str) -> None:
    assert vendor_of(name) == vendor


def test_cupti_range_profiler_counters(tmp_path: Path) -> None:
    ev = [
        x("cpu_op", "aten::mm", T0, 100),
        x("cuda_profiler_range", "ampere_sgemm", T0 + 10, 50, pid=0, tid=0,
          **{"smsp__inst_executed.sum": 1200, "smsp__sass_thread_inst_executed_op_ffma.sum": 7}),
    ]  # fmt: skip
    tr = read(write(tmp_path, {"traceEvents": ev}))
    assert tr.kernels.empty
    c = tr.counters.sort_values("metric")
    assert c["metric"].tolist() == ["smsp__inst_executed.sum",
                                    "smsp__sass_thread_inst_executed_op_ffma.sum"]  # fmt: skip
    assert c["value"].tolist() == [1200.0, 7.0] and set(c["name"]) == {"ampere_sgemm"}
    assert any("no kernel events" in n and "counters" in n for n in tr.notes)


def test_gzip_and_plain_give_the_same_tables(tmp_path: Path) -> None:
    a = read(write(tmp_path, modern(), "a.json"))
    b = read(write(tmp_path, modern(), "b.json.gz"))
    for name in TABLES:
        assert getattr(a, name).equals(getattr(b, name)), name


def test_folder_of_ranks(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    for r in (1, 0):
        doc = modern(T0 + 1000 * r)
        doc["distributedInfo"] = {"rank": r}
        write(folder, doc, f"worker{r}.json.gz")
    (folder / "notes.txt").write_text("not a trace")
    tr = read(folder)
    assert tr.ranks == [0, 1]
    assert tr.kernels.groupby("rank").size().tolist() == [2, 2]
    assert sorted(tr.metadata) == [0, 1]
    # Rank 1 started 1000 µs after rank 0: a shared time origin.
    k = tr.kernels[tr.kernels["name"] == "sm90_xmma_gemm"].sort_values("rank")
    assert k["ts"].tolist() == [50, 1050]
    # op_index points into the concatenated cpu_ops frame, rank by rank.
    for _, row in k.iterrows():
        op = tr.cpu_ops.loc[row["op_index"]]
        assert (op["name"], op["rank"]) == ("aten::addmm", row["rank"])


def test_folder_without_rank_info_numbers_ranks_by_file_order(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    for name in ("b.json", "a.json", "c.json"):
        write(folder, modern(), name)
    tr = read(folder)
    assert tr.ranks == [0, 1, 2]
    for name in TABLES:
        frame = getattr(tr, name)
        assert "rank" in frame.columns


def test_nbprof_load_uses_the_reader(tmp_path: Path) -> None:
    # Imported from its module: the package-level lazy ``nbprof.load`` resolves ``profile``
    # to the capture function instead of this module (reported; nbprof/__init__.py).
    from nbprof.loading import load

    prof = load(write(tmp_path, modern()))
    assert len(prof.kernels) == 2 and prof.trace.source.endswith("t.json")


def test_progress_forced_on_and_off(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write(tmp_path, modern())
    read(p, progress=False)
    assert capsys.readouterr().err == ""
    read(p, progress=True)
    assert "loading t.json" in capsys.readouterr().err
    read(p)  # fast: no bar
    assert capsys.readouterr().err == ""


def test_a_fast_load_does_not_import_tqdm(tmp_path: Path) -> None:
    """The bar of a load that ends before it would appear is never made, and tqdm (whose
    ``tqdm.auto`` imports asyncio: about 35 ms) is not imported for it."""
    p = write(tmp_path, modern())
    code = (
        "import sys, nbprof.loading\n"
        f"nbprof.loading.load({str(p)!r}, cache=False)\n"
        "print('tqdm' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr


# -- bad input ---------------------------------------------------------------------------------


def bad(tmp_path: Path, data: bytes, name: str = "bad.json") -> str:
    p = tmp_path / name
    p.write_bytes(data)
    with pytest.raises(nbprof.TraceError) as info:
        read(p)
    assert info.value.path == str(p)
    return info.value.reason


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(nbprof.TraceError, match="file not found"):
        read(tmp_path / "nope.json")


def test_folder_without_traces(tmp_path: Path) -> None:
    with pytest.raises(nbprof.TraceError, match="no trace files"):
        read(tmp_path)


GOOD = json.dumps(modern()).encode()


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "file is empty"),
        (b"hello", "not valid JSON"),
        (GOOD[: len(GOOD) // 2], "truncated"),
        (b'"a string"', "got a string"),
        (b'{"schemaVersion": 1}', "no `traceEvents`"),
        (b'{"traceEvents": {}}', "`traceEvents` should be an array"),
        (b'{"traceEvents": []}', "no events"),
        (b"[]", "no events"),
        (b'{"traceEvents": [{"ph": "M", "name": "process_name"}]}', "no timed events"),
        (b'{"traceEvents": [{"ph":"X","ts":1,"dur":1}, 5]}', "event 1 should be an object"),
        (b'{"traceEvents": [{"ph":"X","ts":"12","dur":1}]}', "event 0: `ts` should be a number"),
        (b'{"traceEvents": [{"ph":"X","ts":1,"dur":"x"}]}', "event 0: `dur` should be a number"),
        (b'{"traceEvents": [{"ph":"X","ts":1,"dur":1},{"ph":"X","ts":-3,"dur":1}]}',
         "event 1: negative timestamp"),
        (b'{"traceEvents": [{"ph":"X","cat":"cpu_op","ts":1,"dur":-2}]}',
         "event 0: negative duration"),
        (b'{"traceEvents": [{"ph":"X","cat":"kernel","dur":2}, {"ph":"i","ts":1}]}',
         "event 0: duration event has no `ts`"),
        (b'{"traceEvents": [{"ph":"X","cat":"kernel","ts":1,"dur":2,"args":{"grid":"x"}}]}',
         "event 0: `args.grid` should be"),
        (b'{"traceEvents": [{"ph":"X","ts":1,"dur":2,"name":7}]}', "event 0: `name` should be"),
    ],
)  # fmt: skip
def test_bad_input_is_a_trace_error(tmp_path: Path, data: bytes, reason: str) -> None:
    assert reason in bad(tmp_path, data)


def test_gzip_truncated_and_corrupt(tmp_path: Path) -> None:
    gz = gzip.compress(GOOD)
    assert "truncated" in bad(tmp_path, gz[: len(gz) // 2], "cut.json.gz")
    flipped = bytearray(gz)
    flipped[len(gz) // 2] ^= 0xFF
    assert "gzip data is corrupt" in bad(tmp_path, bytes(flipped), "flip.json.gz")


def test_malformed_device_properties_are_ignored_with_a_note(tmp_path: Path) -> None:
    doc = modern()
    doc["deviceProperties"] = "oops"
    tr = read(write(tmp_path, doc))
    assert any("deviceProperties" in n for n in tr.notes)
    assert tr.devices["vendor"].tolist() == ["unknown"]


def test_empty_device_properties_are_not_called_malformed(tmp_path: Path) -> None:
    # torch writes an empty list when it profiled without a GPU.
    doc = modern()
    doc["deviceProperties"] = []
    tr = read(write(tmp_path, doc))
    assert not any("deviceProperties" in n for n in tr.notes)


def test_origin_unknown_for_relative_times_without_base(tmp_path: Path) -> None:
    tr = read(write(tmp_path, {"traceEvents": [x("kernel", "k", 5.5, 1, pid=0, tid=7)]}))
    assert tr.origin_ns is None
    assert tr.kernels["ts"].tolist() == [0.0]
    assert np.isnan(tr.kernels["launch_ts"].iloc[0])


def test_chunked_decoding_gives_the_same_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nbprof.trace import reader

    p = write(tmp_path, modern())
    whole = read(p)
    monkeypatch.setattr(reader, "CHUNK", 3)
    chunked = read(p)
    for name in TABLES:
        assert getattr(whole, name).equals(getattr(chunked, name)), name
    # Error positions are counted in the whole file, not within a chunk.
    doc = modern()
    doc["traceEvents"][7]["dur"] = -1.0
    with pytest.raises(nbprof.TraceError, match="event 7: negative duration"):
        read(write(tmp_path, doc, "neg.json"))
    doc = modern()
    doc["traceEvents"][8] = 3
    with pytest.raises(nbprof.TraceError, match="event 8 should be an object"):
        read(write(tmp_path, doc, "obj.json"))
