"""Which GPU a trace's events ran on: device properties paired with the events' device ids,
and AMD Instinct GPUs recognised from their compute units and memory."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from golden import KinetoBuilder, read_trace

from nbprof.analysis import analyze, peaks
from nbprof.analysis.model import Diagnosis

GIB = 1024**3
MFMA = "Cijk_Alik_Bljk_HB_MT128x128x32_MI32x32x8x1_SN"
ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>"


def _hip(b: KinetoBuilder) -> KinetoBuilder:
    """The builder's launches as a ROCm trace records them (hip*, not cuda*)."""
    for e in b.events:
        if e["name"].startswith("cuda"):
            e["name"] = "hip" + e["name"][4:]
    return b


def _amd(name: str, cus: int, mem: int, device: int = 2) -> KinetoBuilder:
    """One properties entry (id 0), as a single-GPU ROCm process writes it, and GPU events
    on ``device``: a matrix-core GEMM launched by an FP32 addmm, and an elementwise kernel."""
    b = KinetoBuilder(device_name=name, sm_count=cus, total_memory=mem, major=9, minor=4)
    b.cpu_op("aten::addmm", 0, 30, dims=[[4096], [32, 4096], [4096, 4096]], types=["float"] * 3)
    b.kernel(MFMA, 10, 100, launch_ts=5, device=device, grid=(304, 1, 1))
    b.kernel(ELEMENTWISE, 120, 20, device=device, grid=(304, 1, 1))
    return _hip(b)


def diagnose(b: KinetoBuilder, tmp_path: Path) -> Diagnosis:
    return analyze(read_trace(b.write(tmp_path)))


def test_the_one_properties_entry_describes_the_one_gpu_of_the_events(tmp_path: Path) -> None:
    d = diagnose(_amd("", 304, 192 * GIB), tmp_path)
    (m,) = d.devices
    assert m.device == "2"
    # Entry 0's numSms; without the pairing the events' device 2 has no properties at all.
    assert m.sm_count == 304
    assert "device id 2, which no deviceProperties entry has" in m.basis["sm_count"].how
    assert "(id 0)" in m.basis["sm_count"].how
    # 304 CUs and 192 GiB: only the MI300X of the table has both.
    assert m.model == "AMD Instinct MI300X"
    assert m.basis["model"].kind == "estimated"
    assert "304 CUs and 192.0 GiB" in m.basis["model"].how
    assert m.peak_gbps == 5300.0  # MI300X datasheet
    # The addmm's GEMM ran on matrix cores in FP32: the MI300X's FP32 matrix peak, 163.4.
    assert m.peak_tflops == 163.4
    roof = d.ops_roofline
    assert roof["dtype"].tolist() == ["fp32_matrix"]
    # 2·32·4096·4096 FLOPs against bytes (4096 + 32·4096 + 4096² + 32·4096)·4: below
    # the ridge 163.4e12 / 5.3e12 = 30.8 FLOP/B.
    flops = 2 * 32 * 4096 * 4096
    nbytes = (4096 + 32 * 4096 + 4096 * 4096 + 32 * 4096) * 4
    assert roof["intensity"].iloc[0] == pytest.approx(flops / nbytes)
    assert flops / nbytes < 163.4e12 / 5.3e12
    assert roof["bound"].iloc[0] == "memory"
    assert m.label == "AMD Instinct MI300X"
    assert "unknown_peaks" not in {f.id for f in d.findings}


def test_a_second_gpu_without_an_entry_leaves_the_pairing_open(tmp_path: Path) -> None:
    b = _amd("", 304, 192 * GIB)
    b.kernel(ELEMENTWISE, 200, 20, device=3)
    _hip(b)
    d = diagnose(b, tmp_path)
    assert {m.device for m in d.devices} == {"2", "3"}
    for m in d.devices:
        assert m.sm_count is None and m.model is None
        assert m.basis["sm_count"].kind == "unknown"


def test_entries_that_describe_different_gpus_are_not_paired(tmp_path: Path) -> None:
    b = _amd("", 304, 192 * GIB)
    doc = b.document()
    other = dict(doc["deviceProperties"][0], id=1, numSms=228, totalGlobalMem=128 * GIB)
    doc["deviceProperties"].append(other)
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(doc))
    (m,) = analyze(read_trace(path)).devices
    assert m.sm_count is None and m.model is None


def test_a_device_with_its_own_entry_keeps_it(tmp_path: Path) -> None:
    b = _amd("AMD Instinct MI300X", 304, 192 * GIB, device=0)
    (m,) = diagnose(b, tmp_path).devices
    assert m.sm_count == 304
    assert "no deviceProperties entry" not in m.basis["sm_count"].how
    assert m.model == "AMD Instinct MI300X" and m.basis["model"].kind == "trace"
    assert not m.model_inferred and m.label == "AMD Instinct MI300X"


@pytest.mark.parametrize(
    ("name", "cus", "mem_gib", "model"),
    [
        ("", 304, 192, "AMD Instinct MI300X"),
        ("AMD Radeon Graphics", 304, 256, "AMD Instinct MI325X"),
        ("AMD Radeon Graphics", 104, 64, "AMD Instinct MI210 or one MI250 GCD"),
        ("AMD Instinct MI250X/MI250", 110, 64, "AMD Instinct MI250X (one GCD)"),
        ("AMD Instinct MI250X/MI250", 104, 64, "AMD Instinct MI210 or one MI250 GCD"),
        ("AMD Instinct MI210", 104, 64, "AMD Instinct MI210 or one MI250 GCD"),
        # Not in the table: a Radeon RX 7900 XTX, an MI300A (unified memory), an MI300X
        # partitioned into eight (CPX mode: 38 CUs each).
        ("AMD Radeon Graphics", 96, 24, None),
        ("", 228, 128, None),
        ("AMD Instinct MI300X", 38, 24, None),
    ],
)
def test_amd_models_from_compute_units_and_memory(
    name: str, cus: int, mem_gib: int, model: str | None
) -> None:
    p, how = peaks.identify(name, int(mem_gib * GIB * 0.999), "amd", cus)
    assert (p.model if p else None) == model
    assert bool(how) == (p is not None)


def test_amd_per_gcd_peaks_are_half_the_mi250s() -> None:
    gcd = peaks.lookup("AMD Radeon Graphics", 64 * GIB, "amd", 104)
    assert gcd is not None
    # MI250 datasheet: 362.1 FP16 TFLOP/s, 90.5 FP32 matrix, 3.2 TB/s for its two GCDs.
    assert gcd.tflops["fp16"] == pytest.approx(362.1 / 2, abs=0.1)
    assert gcd.tflops["fp32_matrix"] == pytest.approx(90.5 / 2, abs=0.1)
    assert gcd.mem_gbps == 3200.0 / 2


# -- the corpus ---------------------------------------------------------------------------


def _doc(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        doc: dict[str, Any] = json.load(f)
    return doc


@pytest.mark.corpus
def test_corpus_mi300x_vllm_trace_with_one_properties_entry(corpus: Path, tmp_path: Path) -> None:
    """The vLLM MI300X capture's GPU events all carry device id 2, and its eight entries
    name no GPU ("") with 304 CUs and 192 GiB each. Cut to the one entry (id 0) a
    single-GPU process writes, the events still find their GPU."""
    doc = _doc(corpus / "tracelens__vllm_decode_full_graph_capture.json.gz")
    assert {e["args"]["device"] for e in doc["traceEvents"] if e.get("cat") == "kernel"} == {2}
    doc["deviceProperties"] = doc["deviceProperties"][:1]
    assert doc["deviceProperties"][0]["id"] == 0 and doc["deviceProperties"][0]["name"] == ""
    path = tmp_path / "one_entry.json"
    path.write_text(json.dumps(doc))
    (m,) = analyze(read_trace(path)).devices
    assert (m.device, m.sm_count, m.model) == ("2", 304, "AMD Instinct MI300X")
    assert "(id 0)" in m.basis["sm_count"].how
    assert m.peak_gbps == 5300.0


@pytest.mark.corpus
def test_corpus_mi300x_and_mi250_are_recognised(corpus: Path) -> None:
    vllm = analyze(read_trace(corpus / "tracelens__vllm_decode_full_graph_capture.json.gz"))
    (m,) = vllm.devices
    assert (m.name, m.sm_count, m.model) == ("", 304, "AMD Instinct MI300X")
    # The HTA MI250 toy: "AMD Radeon Graphics", 104 CUs, 64 GiB on GPU 2: one MI250 GCD
    # (or an MI210: the same peaks). Its addmm (5x128 by 128x128, FP32) ran on MFMA.
    mi250 = analyze(
        read_trace(corpus / "hta__amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz")
    )
    (g,) = mi250.devices
    assert (g.device, g.name, g.sm_count) == ("2", "AMD Radeon Graphics", 104)
    assert g.model == "AMD Instinct MI210 or one MI250 GCD"
    assert g.peak_gbps == 1600.0 and g.peak_tflops == 45.3
    assert "unknown_peaks" not in {f.id for f in mi250.findings}
