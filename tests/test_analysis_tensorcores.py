"""Tensor Core use from the evidence a trace holds, and the precision advice that follows
from it: "allow TF32 / use bf16 autocast" only for GEMMs the trace shows computing in FP32,
never for GEMMs already in bf16 or FP8, and "unknown" where nothing says."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest
from golden import KinetoBuilder, read_trace

from nbprof.analysis import analyze
from nbprof.analysis.model import Diagnosis

ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>"
#: A GEMM whose name says GEMM and nothing of its data type or Tensor Core use.
OPAQUE_GEMM = "gemm_kernel_tile128x128_stage4"
SGEMM = "ampere_sgemm_128x64_nn"
BF16 = ["c10::BFloat16", "c10::BFloat16"]
FP32 = ["float", "float"]
PRECISION_ADVICE = re.compile(r"autocast|tf32|TF32|float32_matmul_precision", re.IGNORECASE)


def diagnose(b: KinetoBuilder, tmp_path: Path) -> Diagnosis:
    return analyze(read_trace(b.write(tmp_path)))


def gemms(
    kernel: str, types: list[str] | None, op: str = "aten::mm", simt_us: float = 0.0
) -> KinetoBuilder:
    """20 steps on an H100, each an op launching a 60 µs GEMM kernel and a 20 µs
    elementwise kernel (GEMMs: 75% of the 1.6 ms kernel time); ``simt_us`` adds one
    FP32 SIMT GEMM at the end."""
    b = KinetoBuilder()
    for i in range(20):
        t = 100.0 + i * 100.0
        b.cpu_op(op, t - 50, 10, types=types)
        b.kernel(kernel, t, 60, launch_ts=t - 49, grid=(132, 1, 1))
        b.kernel(ELEMENTWISE, t + 60, 20, launch_ts=t - 45, grid=(132, 1, 1))
    if simt_us:
        b.kernel(SGEMM, 2200.0, simt_us, launch_ts=2150.0, grid=(132, 1, 1))
    return b


def _finding(d: Diagnosis, prefix: str = "tensor") -> list[Any]:
    return [f for f in d.findings if prefix in f.id]


def test_bf16_gemms_known_by_their_ops_are_on_tensor_cores_and_get_no_advice(
    tmp_path: Path,
) -> None:
    d = diagnose(gemms(OPAQUE_GEMM, BF16), tmp_path)
    m = d.devices[0]
    # 20 x 60 µs of 1,600 µs kernel time, launched by bf16 aten::mm calls.
    assert (m.tensor_core_basis, m.tensor_core_pct) == ("ops", pytest.approx(75.0))
    assert _finding(d) == []


def test_fp32_gemms_get_the_tf32_and_autocast_advice(tmp_path: Path) -> None:
    d = diagnose(gemms(OPAQUE_GEMM, FP32, simt_us=80.0), tmp_path)
    (f,) = _finding(d)
    assert f.id == "low_tensor_core_share"
    # FP32 by op (1,200 µs) and by name (the SIMT GEMM's 80 µs) of 1,680 µs.
    assert f.evidence["fp32_gemm_pct"] == pytest.approx(round(1280 / 1680 * 100, 1))
    assert "set_float32_matmul_precision('high')" in (f.code or "")


def test_gemms_nothing_types_get_unknown_and_no_precision_advice(tmp_path: Path) -> None:
    # The same GEMMs with no input types (a graph replay, record_shapes off): only the
    # SIMT GEMM's 80 µs of 1,680 µs is FP32 by evidence; 1,200 µs say nothing.
    d = diagnose(gemms(OPAQUE_GEMM, None, simt_us=80.0), tmp_path)
    (f,) = _finding(d)
    assert (f.id, f.severity) == ("tensor_core_use_unknown", "info")
    assert f.evidence["unknown_gemm_pct"] == pytest.approx(round(1200 / 1680 * 100, 1))
    assert "71.4% of kernel time" in f.detail
    assert not PRECISION_ADVICE.search(f"{f.fix} {f.code or ''}")


def test_inductor_triton_matmul_in_bf16_runs_on_tensor_cores(tmp_path: Path) -> None:
    # Inductor records each Triton kernel as an op of the kernel's own name, with its
    # inputs' types: a bf16 tl.dot template runs on MMA.
    name = "triton_tem_fused_mm_0"
    d = diagnose(gemms(name, BF16, op=name), tmp_path)
    m = d.devices[0]
    assert (m.tensor_core_basis, m.tensor_core_pct) == ("ops", pytest.approx(75.0))
    assert _finding(d) == []
    # In FP32 (TF32 off, Inductor's default) it does not, and the advice is due.
    fp32 = diagnose(gemms(name, FP32, op=name), tmp_path)
    assert [f.id for f in _finding(fp32)] == ["low_tensor_core_share"]


@pytest.mark.parametrize(
    "kernel",
    [
        "_w8a8_block_fp8_matmul",  # vLLM's Triton FP8 matmul
        "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::"
        "GroupProblemShape<cute::tuple<int, int, int>>, cutlass::gemm::collective::"
        "CollectiveMma<cutlass::gemm::MainloopSm100ArrayTmaUmmaWarpSpecialized<3>>>>",
    ],
)
def test_fp8_and_umma_gemms_by_name_get_no_precision_advice(tmp_path: Path, kernel: str) -> None:
    d = diagnose(gemms(kernel, None, simt_us=80.0), tmp_path)
    m = d.devices[0]
    assert m.tensor_core_pct == pytest.approx(1200 / 1680 * 100)
    assert _finding(d) == []


def test_amd_bf16_gemms_known_by_their_ops_use_matrix_cores(tmp_path: Path) -> None:
    b = gemms(OPAQUE_GEMM, BF16)
    b.device_name, b.sm_count, b.total_memory, b.major, b.minor = "", 304, 192 * 1024**3, 9, 4
    for e in b.events:
        if e["name"].startswith("cuda"):
            e["name"] = "hip" + e["name"][4:]
    m = diagnose(b, tmp_path).devices[0]
    assert m.vendor == "amd"
    assert (m.tensor_core_basis, m.tensor_core_pct) == ("ops", pytest.approx(75.0))


# -- the corpus ---------------------------------------------------------------------------

QWEN = "tracelens__h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"


def _renamed(corpus: Path, tmp_path: Path, keep_types: bool) -> Path:
    """The Qwen H100 trace with its cuBLAS sm90_xmma bf16 GEMMs renamed to a name no rule
    knows (as the next GPU generation's library may call them), and optionally without
    the ops' input types."""
    with gzip.open(corpus / QWEN, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    renamed = 0
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and e["name"].startswith("sm90_xmma_gemm_bf16"):
            e["name"] = OPAQUE_GEMM
            renamed += 1
        a = e.get("args")
        if not keep_types and a:
            a.pop("Input type", None)
    assert renamed > 100  # the GEMMs of every layer and step
    path = tmp_path / ("qwen_renamed.json" if keep_types else "qwen_renamed_untyped.json")
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.corpus
def test_corpus_h100_bf16_gemms_keep_tensor_cores_without_their_names(
    corpus: Path, tmp_path: Path
) -> None:
    """Qwen 0.5B in bf16 on an H100: sm90_xmma bf16 GEMMs 28.2% of kernel time, flash
    attention 8.5%. Renamed, 168 of the 241 GEMMs are still known by the bf16 aten::mm /
    addmm ops they were launched in (19.5% of kernel time); the other 73 (8.7%) have no
    launching op and are unknown. With the ops' types gone too, all are unknown, and
    precision advice is never given."""
    named = analyze(read_trace(corpus / QWEN))
    tc = named.devices[0].tensor_core_pct
    assert tc is not None and 35 < tc < 40
    assert _finding(named) == []
    trace = read_trace(corpus / QWEN)
    k = trace.kernels
    gemm = k["name"].str.startswith("sm90_xmma_gemm_bf16").to_numpy()
    orphan = gemm & (k["op_index"].to_numpy() < 0)
    assert (int(gemm.sum()), int(orphan.sum())) == (241, 73)
    orphan_pct = float(k["dur"].to_numpy()[orphan].sum() / k["dur"].sum() * 100)
    by_ops = analyze(read_trace(_renamed(corpus, tmp_path, keep_types=True)))
    m = by_ops.devices[0]
    assert m.tensor_core_pct == pytest.approx(tc - orphan_pct)
    assert _finding(by_ops) == []
    blind = analyze(read_trace(_renamed(corpus, tmp_path, keep_types=False)))
    findings = _finding(blind)
    assert [f.id for f in findings] == ["tensor_core_use_unknown"]
    assert not PRECISION_ADVICE.search(f"{findings[0].fix} {findings[0].code or ''}")


@pytest.mark.corpus
def test_corpus_fp32_gemms_get_the_advice(corpus: Path) -> None:
    """The FP32 runs of the corpus: ResNet-50 on a V100 (cuDNN kernels templated on
    float, sgemm), an MLP on an RTX 2080 Ti (volta_sgemm). Their GEMM time is FP32 by
    evidence, all of it."""
    for name in (
        "kineto-tbplugin__resnet50_num_workers_0__worker0.1623143089861.pt.trace.json.gz",
        "param__linear_kineto.json.gz",
    ):
        d = analyze(read_trace(corpus / name))
        (f,) = _finding(d)
        assert f.id == "low_tensor_core_share", name
        assert f.evidence["fp32_gemm_pct"] == pytest.approx(f.evidence["gemm_conv_pct"]), name
