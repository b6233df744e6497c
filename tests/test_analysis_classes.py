"""Kernel classes rest on evidence, and the compute/memory verdict says how firmly."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from golden import KinetoBuilder, read_trace

from nbprof.analysis import analyze
from nbprof.analysis.classes import (
    CLASSES,
    class_shares,
    kernel_classes,
    kernel_identity,
    roofline_memory_evidence,
)
from nbprof.analysis.model import Diagnosis
from nbprof.analysis.verdict import CLASS_COVER_PCT

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
SGEMM = "ampere_sgemm_128x64_nn"
ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>"
CUSTOM = "void my_ext::fused_rope_kernel<float>(float*, float const*, int)"

# Real names from the corpus traces (kernel families, trimmed after the template head).
MEMORY_NAMES = [
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3>)",
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<"
    "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)",
    "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps"
    "<float, float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float)",
    "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 2, 128, "
    "1>(float*, at::native::(anonymous namespace)::CatArrInputTensorMetadata)",
    "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, "
    "unsigned int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>)",
    "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true>(float*)",
    "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, 512, true, 1>(cudnnTensorStruct)",
    "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, "
    "(cudnnKernelDataType_t)2>(cudnn::ops::nchw2nhwc_params_t<float>, float const*)",
    "void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>, float>(int)",
    "void cub::DeviceScanKernel<cub::DeviceScanPolicy<int>::Policy600, int*, int*>(int*)",
    "void split_embedding_backward_codegen_dense_unweighted_find_long_segments(int)",
    "triton_poi_fused_add_cos_sin_0",
    "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_1",
    "triton_per_fused_native_layer_norm_2",
    # An Inductor pointwise kernel fused around an mm op is still pointwise.
    "triton_poi_fused__unsafe_view_mm_3",
    # cuBLAS's split-K reduction adds partial GEMM results; it does no matrix math itself.
    "void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, float, true>(int)",
    "__amd_rocclr_copyBuffer",
]
COMPUTE_NAMES = [
    SGEMM,
    "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>(Params)",
    "implicit_convolve_sgemm",
    "void fft2d_r2c_32x32<float, false, 0u, false>(float2*, float const*)",
    "Cijk_Alik_Bljk_SB_MT64x64x16_MI32x32x2x1",
]
COMM_NAMES = [
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
    "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm*, ncclWork*)",
    # PyTorch symmetric memory and vLLM's custom all-reduce.
    "void c10d::symmetric_memory::multimem_all_reduce_kernel<float, 16, 8>(float*, unsigned long)",
    "void c10d::symmetric_memory::one_shot_all_reduce_kernel<c10::BFloat16, 8>(c10::BFloat16*)",
    "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals)",
    "rcclGenericKernel<1, false>(ncclDevComm*, unsigned long, ncclWork*)",
    # Expert-parallel exchanges and other communication libraries, by their own words.
    "void deep_ep::intranode::dispatch<8, 768, 4096>(int4*, float*, int*, long*, float*)",
    "void deep_ep::intranode::notify_dispatch<8>(int const*, int*, int, int const*, int*)",
    "void deep_ep::internode_ll::combine<false, 7168>(void*, void*, int*, void const*)",
    "void deep_ep::internode::cached_notify<false>(int, int, int, int, int, int*)",
    "void nvshmemi_transfer_rma_kernel<float>(float*, float const*, unsigned long, int)",
    "nvshmemx_barrier_all_on_stream_kernel",
    "mscclKernel_Sum_float_Simple_false(ncclDevComm*, mscclAlgo*, mscclWork*)",
    "void pplx::dispatchKernel<64, true>(int, int, unsigned char*)",
    "void tensorrt_llm::kernels::ar_fusion::allreduce_fusion_kernel_oneshot_lamport<true>(int)",
]
OTHER_NAMES = [
    CUSTOM,
    "<img src=x onerror=alert(1)>",
    "my_kernel",
    # A MoE layer's own dispatch/combine kernels move tokens on one GPU: no library says
    # they communicate, so their names alone claim nothing.
    "moe_dispatch_kernel",
    "void combine_kernel<float>(float*, int)",
    # Older Inductor names carry no kind: pointwise, reduction and template look alike.
    "triton__0d1d2d3d4d5d6d",
    # FlashInfer's sampling kernels are no flash attention.
    "void flashinfer::sampling::TopKTopPSamplingFromProbKernel<1024, 1, 16, true, float, int>",
]
# Names that used to be misread by substring: none is a GEMM, a convolution or attention.
NOT_COMPUTE = {
    "void vllm::_typeConvert<c10::BFloat16>(float const*, c10::BFloat16*, int)": "memory",
    "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, 0>(bf16*)": "memory",
    "void tensorrt_llm::kernels::finalizeMoeRoutingKernel<cutlass::bfloat16_t, float, "
    "cutlass::gemm::GemmShape<128, 128, 64>>(cutlass::bfloat16_t const*)": "memory",
    "void cub::DeviceReduceByKeyKernel<cub::DispatchReduceByKey<long*, long*>::Policy, "
    "long*, int*>(long*)": "memory",
    "void flashinfer::sampling::TopKTopPSamplingFromProbKernel<1024, 1, 16>(float*)": "other",
    # Decode attention reads the whole KV cache for a few FLOPs a byte: memory-bound.
    "void flashinfer::BatchDecodeWithPagedKVCacheKernel<true, 128, 4>(flashinfer::Params)": (
        "memory"
    ),
    "void vllm::paged_attention_v1_kernel<__nv_bfloat16, 128, 16>(__nv_bfloat16*)": "memory",
}
# And names that are compute only through their words or their wrapper's argument.
COMPUTE_BY_WORDS = [
    "void flashinfer::BatchPrefillWithPagedKVCacheKernel<128, 4, true>(flashinfer::Params)",
    "void flash::FlashAttnFwdSm90<flash::Kernel_traits<128>>(flash::Params)",
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align1>(Params)",
    "void cudnn::cnn::conv2d_grouped_direct_kernel<float, float, 3>(cudnnTensorStruct)",
    "gemv2T_kernel_val<int, int, float, float, float, 128, 16, 4, 4, false>(float)",
]


def classes_of(names: list[str], tc: list[bool] | None = None, **kw: object) -> list[str]:
    s = pd.Series(names, index=pd.RangeIndex(10, 10 + len(names)))
    flags = np.zeros(len(names), dtype=bool) if tc is None else np.array(tc)
    out = kernel_classes(s, flags, **kw)  # type: ignore[arg-type]
    assert list(out.index) == list(s.index)
    return out["cls"].tolist()


def test_memory_needs_a_memory_bound_family_name() -> None:
    assert classes_of(MEMORY_NAMES) == ["memory"] * len(MEMORY_NAMES)


def test_gemm_conv_fft_names_are_compute() -> None:
    assert classes_of(COMPUTE_NAMES) == ["compute"] * len(COMPUTE_NAMES)


@pytest.mark.parametrize("name", list(NOT_COMPUTE))
def test_names_are_matched_on_words_not_substrings(name: str) -> None:
    assert classes_of([name]) == [NOT_COMPUTE[name]]


@pytest.mark.parametrize("name", COMPUTE_BY_WORDS)
def test_compute_names_found_by_words(name: str) -> None:
    assert classes_of([name]) == ["compute"]


def test_kernel_identity_drops_template_arguments_but_unwraps_wrappers() -> None:
    assert kernel_identity("void at::native::reduce_kernel<512, 1, Foo<gemm>>(int)") == (
        "at::native::reduce_kernel"
    )
    assert kernel_identity("void cutlass::Kernel2<cutlass_80_wmma_gemm_32x32>(Params)") == (
        "cutlass_80_wmma_gemm_32x32"
    )
    assert kernel_identity("ampere_sgemm_128x64_nn") == "ampere_sgemm_128x64_nn"


def test_a_memory_family_kernel_never_counts_as_tensor_core() -> None:
    moe = next(n for n in NOT_COMPUTE if "finalizeMoe" in n)
    out = kernel_classes(pd.Series([moe, GEMM]), np.array([True, True]))
    assert out["cls"].tolist() == ["memory", "tensor_core"]
    assert out["tensor_core"].tolist() == [False, True]


def test_collectives_are_communication_even_when_flagged_tensor_core() -> None:
    s = pd.Series(COMM_NAMES)
    out = kernel_classes(s, np.ones(len(COMM_NAMES), dtype=bool))
    assert out["cls"].tolist() == ["communication"] * len(COMM_NAMES)
    assert not out["tensor_core"].any()


def test_tensor_core_evidence_outranks_the_name() -> None:
    names = [GEMM, SGEMM, CUSTOM]
    assert classes_of(names, [True, False, True]) == ["tensor_core", "compute", "tensor_core"]


def test_unrecognised_names_are_other_not_memory() -> None:
    assert classes_of(OTHER_NAMES) == ["other"] * len(OTHER_NAMES)


def test_roofline_evidence_makes_an_unknown_kernel_memory_but_never_a_gemm() -> None:
    names = [CUSTOM, SGEMM, "my_kernel"]
    got = classes_of(names, memory_evidence=np.array([True, True, False]))
    assert got == ["memory", "compute", "other"]


def test_empty_names() -> None:
    out = kernel_classes(pd.Series([], dtype=object), np.zeros(0, dtype=bool))
    assert out.empty and list(out.columns) == ["cls", "tensor_core"]


def test_class_shares_list_every_class() -> None:
    shares = class_shares(np.array([30.0, 10.0, 60.0]), np.array(["memory", "compute", "other"]))
    assert list(shares) == list(CLASSES)
    assert shares["other"] == pytest.approx(60.0)
    assert shares["tensor_core"] == 0.0
    assert class_shares(np.zeros(2), np.array(["memory", "other"])) == {}


def diagnose(b: KinetoBuilder, tmp_path: Path) -> Diagnosis:
    return analyze(read_trace(b.write(tmp_path)))


def busy_trace(parts: list[tuple[str, float]]) -> KinetoBuilder:
    """Back-to-back kernels (each launched early), so the GPU is busy and none is short;
    durations ×10, so that a few kernels still make the millisecond of GPU work a verdict
    on kernel classes needs (shares are unchanged)."""
    b = KinetoBuilder()
    t = 0.0
    for name, dur in parts:
        b.kernel(name, t, 10 * dur, launch_ts=0.0)
        t += 10 * dur
    return b


def test_hostile_and_unknown_names_are_not_memory_bound_with_confidence(tmp_path: Path) -> None:
    b = busy_trace([("<img src=x>", 50.0), ("<script>alert(1)</script>", 30.0), (CUSTOM, 20.0)])
    d = diagnose(b, tmp_path)
    assert set(d.kernel_class["cls"]) == {"other"}
    assert set(d.top_kernels["cls"]) == {"other"}
    v = d.verdict
    assert not (v.bottleneck == "memory_bound" and v.confidence == "high")
    assert v.confidence == "low"
    assert v.basis == "none"
    assert "100% of kernel time is in kernels nbprof cannot classify" in v.summary
    assert "unclassified_kernels" in [f.id for f in d.findings]
    assert "memory_bound_kernels" not in [f.id for f in d.findings]
    j = json.loads(json.dumps(d.to_json()))
    assert j["verdict"]["confidence"] == "low"
    assert j["verdict"]["basis"] == "none"
    assert j["verdict"]["bottleneck"] == v.bottleneck


def test_confidence_and_basis_in_json_when_classes_decide(tmp_path: Path) -> None:
    d = diagnose(busy_trace([(GEMM, 90.0), (ELEMENTWISE, 10.0)]), tmp_path)
    assert d.verdict.bottleneck == "compute_bound"
    j = d.to_json()["verdict"]
    assert (j["confidence"], j["basis"]) == ("high", "kernel_classes")
    assert set(j) >= {"bottleneck", "summary", "confidence", "basis"}
    assert "unclassified_kernels" not in [f.id for f in d.findings]


def test_other_verdicts_name_their_basis(tmp_path: Path) -> None:
    b = KinetoBuilder()
    b.kernel(COMM_NAMES[0], 0, 1600)  # exposed: nothing runs beside it
    b.kernel(SGEMM, 1600, 400)
    v = diagnose(b, tmp_path).verdict
    assert (v.bottleneck, v.confidence, v.basis) == (
        "communication_bound",
        "high",
        "exposed_communication",
    )


@pytest.mark.parametrize(
    ("unknown_us", "confidence"),
    [(30.0, "high"), (31.0, "low")],
    ids=["classified-70pct", "classified-69pct"],
)
def test_class_cover_threshold_boundary(tmp_path: Path, unknown_us: float, confidence: str) -> None:
    # 100 units of kernel time: 40 elementwise, the unknown share, the rest GEMM.
    assert CLASS_COVER_PCT == 70.0
    parts = [(ELEMENTWISE, 40.0), (CUSTOM, unknown_us), (SGEMM, 60.0 - unknown_us)]
    d = diagnose(busy_trace(parts), tmp_path)
    v = d.verdict
    assert v.bottleneck == "memory_bound"  # 40% against 30% or 29% either way
    assert v.basis == "kernel_classes"
    assert v.confidence == confidence
    said = f"{unknown_us:.0f}% of kernel time is in kernels nbprof cannot classify"
    assert (said in v.summary) == (confidence == "low")
    assert ("unclassified_kernels" in [f.id for f in d.findings]) == (confidence == "low")


def test_roofline_evidence_marks_kernels_of_memory_bound_ops(tmp_path: Path) -> None:
    b = KinetoBuilder()
    small = [[4096, 8], [8, 4096]]  # intensity < 1 FLOP/B: far below the H100's ridge
    big = [[4096, 4096], [4096, 4096]]  # intensity ~680 FLOP/B: above it
    f_small, f_big = 2.0 * 4096 * 8 * 4096, 2.0 * 4096**3
    b.cpu_op("aten::mm", 0, 30, flops=f_small, dims=small, types=["float"] * 2)
    b.kernel(CUSTOM, 10, 40, launch_ts=5)
    b.cpu_op("aten::addmm", 100, 30, flops=f_big, dims=big, types=["float"] * 2)
    b.kernel("my_matmul_kernel", 110, 40, launch_ts=105)
    b.kernel("my_kernel", 200, 10, launch_ts=160)  # launched outside any op
    trace = read_trace(b.write(tmp_path))
    d = analyze(trace)
    roof = d.ops_roofline.set_index("op")["bound"].to_dict()
    assert roof == {"aten::mm": "memory", "aten::addmm": "compute"}
    ev = roofline_memory_evidence(trace.kernels, trace.cpu_ops, trace.cpu_ops, d.ops_roofline)
    assert ev.tolist() == [True, False, False]
    got = kernel_classes(trace.kernels["name"], np.zeros(3, dtype=bool), ev)["cls"].tolist()
    assert got == ["memory", "compute", "other"]  # the second one's name says matmul
    # And the diagnosis itself classes them so: the timeline colours by this table.
    assert d.kernel_class["cls"].tolist() == ["memory", "compute", "other"]
    empty = roofline_memory_evidence(trace.kernels, trace.cpu_ops, trace.cpu_ops, roof_empty())
    assert not empty.any()


def roof_empty() -> pd.DataFrame:
    return pd.DataFrame({"op": pd.Series(dtype=object), "bound": pd.Series(dtype=object)})


def test_class_column_holds_one_object_per_class() -> None:
    """The class column is picked from the five class words: a trace of thousands of
    kernels holds five text objects, not one per kernel."""
    names = pd.Series([GEMM, SGEMM, CUSTOM, "ncclKernel_AllReduce_RING_LL_Sum_float"] * 500)
    column = kernel_classes(names, np.tile([True, False, False, False], 500))["cls"]
    cls = column.to_numpy()
    assert set(cls.tolist()) == {"tensor_core", "compute", "other", "communication"}
    if getattr(column.dtype, "storage", "python") != "python":
        pytest.skip("pandas holds this text in Arrow: no Python objects to count")
    assert len({id(v) for v in cls}) == 4


# -- communication by behaviour: "possibly communication" ---------------------------------

OPAQUE = "void opaque_kernel<4>(int*)"


def exchange_run(
    *, grid: int = 8, stream: int = 30, dur: float = 1500, side: int = 7, steps: int = 10
) -> KinetoBuilder:
    """Steps of 3000 µs on a 132-SM GPU: a 1000 µs GEMM on stream 7, then an unknown
    kernel of ``grid`` blocks on ``stream`` (from t+1000, ``dur`` µs, alone), then a 400
    µs elementwise kernel on stream ``side`` at t+2500 and a 100 µs gap."""
    b = KinetoBuilder()
    for i in range(steps):
        t = 3000.0 * i
        b.kernel(GEMM, t, 1000, stream=7, launch_ts=t - 10, grid=(264, 1, 1))
        b.kernel(OPAQUE, t + 1000, dur, stream=stream, launch_ts=t - 5, grid=(grid, 1, 1))
        b.kernel(ELEMENTWISE, t + 2500, 400, stream=side, launch_ts=t, grid=(512, 1, 1))
    return b


def test_a_dedicated_stream_of_small_long_grids_is_possibly_communication(
    tmp_path: Path,
) -> None:
    d = diagnose(exchange_run(), tmp_path)
    m = d.devices[0]
    span = 9 * 3000 + 2900.0
    # 8 blocks on 132 SMs for 1500 µs (the other stream's median kernel: 700 µs), on a
    # stream running nothing else: 1500 of 2900 µs of kernel time a step, alone.
    assert m.comm_pct == 0.0
    assert m.possible_comm_pct == pytest.approx(1500 / 2900 * 100)
    assert m.span_breakdown["possible_comm"] == pytest.approx(10 * 1500 / span * 100)
    assert m.span_breakdown["compute"] == pytest.approx(10 * 1400 / span * 100)
    assert m.basis["possible_comm_pct"].kind == "estimated"
    assert "streams 30; grids of 8-8 blocks on 132 SMs" in m.basis["possible_comm_pct"].how
    v = d.verdict
    assert (v.bottleneck, v.confidence) == ("communication_bound", "low")
    assert "possibly communication" in v.summary
    assert "cannot classify" not in v.summary


@pytest.mark.parametrize(
    ("grid", "stream", "dur", "side"),
    [(264, 30, 1500, 7), (8, 7, 1500, 9), (8, 30, 300, 7)],
    ids=["fills_the_gpu", "on_the_compute_stream", "shorter_than_the_compute"],
)
def test_without_every_behaviour_an_unknown_kernel_stays_unclassified(
    tmp_path: Path, grid: int, stream: int, dur: float, side: int
) -> None:
    # Its grid fills the 132 SMs, or it shares stream 7 with the GEMMs (the elementwise
    # kernels on a side stream), or it runs 300 µs, shorter than the compute stream's
    # median kernel (700 µs): nothing says it communicates; it stays an unknown kernel.
    b = exchange_run(grid=grid, stream=stream, dur=dur, side=side)
    m = diagnose(b, tmp_path).devices[0]
    assert m.possible_comm_pct == 0.0
    assert m.span_breakdown["possible_comm"] == 0.0


def test_named_exchanges_are_communication_in_the_time_accounting(tmp_path: Path) -> None:
    b = exchange_run()
    for e in b.events:
        if e.get("name") == OPAQUE:
            e["name"] = "void deep_ep::intranode::combine<__nv_bfloat16, 8, 768>(int4*)"
    d = diagnose(b, tmp_path)
    m = d.devices[0]
    span = 9 * 3000 + 2900.0
    assert m.comm_pct == pytest.approx(1500 / 2900 * 100)
    assert m.possible_comm_pct == 0.0
    assert m.span_breakdown["exposed_comm"] == pytest.approx(10 * 1500 / span * 100)
    assert (d.verdict.bottleneck, d.verdict.confidence) == ("communication_bound", "high")


def _opaque(t: object) -> object:
    """The trace with its NCCL kernels renamed to a name no rule knows."""
    import dataclasses

    k = t.kernels.copy()  # type: ignore[attr-defined]
    nccl = k["name"].str.contains("nccl").to_numpy()
    # Text columns are Categoricals: the new name becomes a category first.
    k["name"] = k["name"].cat.add_categories([OPAQUE])
    k.loc[nccl, "name"] = OPAQUE
    return dataclasses.replace(t, kernels=k)  # type: ignore[type-var]


def test_corpus_nccl_kernels_without_their_names_are_possibly_communication(
    corpus: Path,
) -> None:
    path = corpus / "hta__negative_queue_length_values_check__rank0.json.gz"
    if not path.is_file():
        pytest.skip("no DLRM A100 trace")
    t = read_trace(path)
    named = analyze(t).devices[0]
    m = analyze(_opaque(t)).devices[0]  # type: ignore[arg-type]
    # Its NCCL SendRecv kernels run on streams 84, 285 and 363, which run nothing else,
    # with 2-24 blocks on 108 SMs, for 25 µs to 26 ms (the compute streams' median
    # kernel: 4 µs): by behaviour alone all of them are found, 47.4% of kernel time, and
    # the 15% of the span they ran alone is possibly communication, not compute.
    assert named.comm_pct == pytest.approx(47.4, abs=0.1) and named.possible_comm_pct == 0.0
    assert m.comm_pct == 0.0
    assert m.possible_comm_pct == pytest.approx(named.comm_pct)
    assert m.span_breakdown["possible_comm"] == pytest.approx(named.span_breakdown["exposed_comm"])
    assert m.span_breakdown["compute"] == pytest.approx(named.span_breakdown["compute"])
    assert "streams 84, 285, 363; grids of 2-24 blocks on 108 SMs" in (
        m.basis["possible_comm_pct"].how
    )


def test_corpus_dlrm_rank_without_nccl_names_is_possibly_communication_bound(
    corpus: Path,
) -> None:
    files = sorted((corpus / "param__dlrm_kineto_8ranks").glob("*worker1_*.json.gz"))
    if not files:
        pytest.skip("no DLRM rank folder")
    t = read_trace(files[0])
    d = analyze(_opaque(t))  # type: ignore[arg-type]
    m = d.devices[0]
    # Rank 1's all-to-alls and all-reduces (stream 84, 1-12 blocks on 80 SMs, 132-7635 µs)
    # ran alone 59% of its span: named, that is communication-bound; unnamed, possibly.
    assert m.span_breakdown["possible_comm"] == pytest.approx(59.0, abs=0.5)
    v = d.verdict
    assert (v.bottleneck, v.confidence) == ("communication_bound", "low")
    assert "possibly communication" in v.summary


def test_no_corpus_trace_has_possible_communication_beside_its_named_collectives(
    corpus: Path,
) -> None:
    # Every corpus trace's unknown kernels fail one of the behaviours: none is claimed.
    for path in sorted(corpus.glob("*.json.gz")):
        for m in analyze(read_trace(path)).devices:
            assert not m.possible_comm_pct, path.name
