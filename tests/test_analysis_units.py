"""Unit tests of the analysis building blocks: intervals, Tensor Core evidence, peaks."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbprof.analysis import peaks, tensorcores
from nbprof.analysis.roofline import matmul_flops, op_bytes_dtype
from nbprof.analysis.transfers import copies_table
from nbprof.analysis.utilization import union_length, weighted_coverage
from nbprof.trace.model import empty_table

intervals = st.lists(
    st.tuples(st.integers(0, 200), st.integers(0, 50)), min_size=0, max_size=40
)  # (start, length) on an integer grid, so a per-unit count is exact


def _naive_cover(iv: list[tuple[int, int]], weights: list[float] | None = None) -> float:
    total = 0.0
    for t in range(0, 260):
        level = sum(
            (weights[i] if weights else 1.0) for i, (s, n) in enumerate(iv) if s <= t < s + n
        )
        total += min(level, 1.0)
    return total


@settings(max_examples=60, deadline=None)
@given(intervals)
def test_union_length_matches_unit_count(iv: list[tuple[int, int]]) -> None:
    s = np.array([a for a, _ in iv], dtype="float64")
    e = np.array([a + n for a, n in iv], dtype="float64")
    assert union_length(s, e) == pytest.approx(_naive_cover(iv))


@settings(max_examples=60, deadline=None)
@given(intervals, st.data())
def test_weighted_coverage_adds_and_clamps(iv: list[tuple[int, int]], data: st.DataObject) -> None:
    w = [data.draw(st.sampled_from([0.25, 0.5, 1.0])) for _ in iv]
    s = np.array([a for a, _ in iv], dtype="float64")
    e = np.array([a + n for a, n in iv], dtype="float64")
    assert weighted_coverage(s, e, np.array(w)) == pytest.approx(_naive_cover(iv, w))


TC_NAMES = [
    "volta_h884gemm_64x64_ldg8_nn",  # Volta
    "volta_s884cudnn_fp16_256x128_ldg8_relu_exp_small_nhwc_tn_v1",
    "turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_tn",  # Turing
    "ampere_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn",  # Ampere
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align4>(Params)",
    "sm80_xmma_gemm_tf32f32_tf32f32_f32_nn_n_tilesize128x128x16_stage4_warpsize2x2x1",
    "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw",
    "sm86_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc",
    "sm89_xmma_gemm_e4m3e4m3_bf16f32_f32_tn_n_tilesize128x128x64",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1",
    "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<sm90_gmma_bf16>>",
    "nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NTN",  # Hopper cuBLAS
    "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNT",  # Blackwell
    "void tcgen05_mma_kernel<cute::SM100>()",
    "bmm_MxE4m3_E4m3_128x128x128_cluster2x1_sm100a",
    "fmhaSm100aKernel_QkvE4m3OBfloat16HQk128HV128",
    "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>",
    "void flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits>",
    "fmha_cutlassF_f16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel)",
    "ampere_fp16_i8816gemm_int8_128x128_ldg16_relu_nn",
    # PyTorch's grouped mm on Blackwell (a CUTLASS 3 UMMA mainloop: tcgen05.mma), cut short.
    "void cutlass::device_kernel<at::cuda::detail::enable_3x_kernel_for_sm10<cutlass::gemm::"
    "kernel::GemmUniversal<cutlass::gemm::GroupProblemShape<cute::tuple<int, int, int>>, "
    "cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm100ArrayTmaUmmaWarp"
    "Specialized<(int)3, (int)8, (int)2, cute::tuple<cute::C<(int)2>>>>>>>",
    # ... and on Hopper, in FP8 (a warpgroup-MMA "Gmma" mainloop).
    "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::"
    "GroupProblemShape<cute::tuple<int, int, int>>, cutlass::gemm::collective::CollectiveMma<"
    "cutlass::gemm::MainloopSm90ArrayTmaGmmaWarpSpecialized<4>, cutlass::float_e4m3_t>>>",
    # FlashAttention-3 (Hopper), FP8.
    "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::"
    "CollectiveMainloopFwdSm90<2, cute::tuple<cute::C<128>>, 128, cutlass::float_e4m3_t>>>>",
    # vLLM's Triton block-scaled FP8 matmul: tl.dot on FP8 runs on Tensor Cores only.
    "_w8a8_block_fp8_matmul",
    "matmul_kernel_fp8_persistent",
]
NOT_TC_NAMES = [
    "volta_sgemm_128x64_nn",
    "ampere_sgemm_32x32_sliced1x4_tn",
    "void cutlass::Kernel<cutlass_80_simt_sgemm_128x64_8x5_nn_align1>(Params)",
    "void gemv2T_kernel_val<int, int, float, float, float, 128, 16, 4, 4, false>",
    "void gemmSN_TN_kernel<float, 128, 16, 2, 4, 8, 9, false>",
    "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3",
    "sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_cgasize1x1x1_simt",
    "nvjet_sss_128x64_64x4_1x2_h_bz_NNN",  # cuBLAS all-FP32 (TF32 off)
    # FP16 storage, FP32 SIMT arithmetic (Volta cuBLAS): the dtype word does not make it TC.
    "volta_fp16_sgemm_fp16_128x64_nn",
]
SILENT_NAMES = [
    "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>",
    "triton_poi_fused_add_cos_sin_0",
    "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 512, true, 1>",
    # A matrix product whose name gives no data type: its op decides (op evidence), or
    # nothing does; a bf16 elementwise kernel is no product; "summary" holds no "umma".
    "triton_tem_fused_mm_0",
    "fused_moe_kernel",
    "matmul_kernel_persistent",
    "void at::native::vectorized_elementwise_kernel<4, at::native::BFloat16AddFunctor>",
    "summary_bf16_kernel",
    # A SIMT FP32 GEMM wrapped in cutlass::Kernel: "(int)8" in its template is no INT8.
    "void cutlass::Kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::threadblock::"
    "MmaPipelined<cutlass::gemm::GemmShape<(int)128, (int)8>, float>>>",
]


@pytest.mark.parametrize("name", TC_NAMES)
def test_tensor_core_names(name: str) -> None:
    assert tensorcores.name_evidence(pd.Series([name]))[0] == 1


@pytest.mark.parametrize("name", NOT_TC_NAMES)
def test_not_tensor_core_names(name: str) -> None:
    assert tensorcores.name_evidence(pd.Series([name]))[0] == -1


@pytest.mark.parametrize("name", SILENT_NAMES)
def test_silent_names(name: str) -> None:
    assert tensorcores.name_evidence(pd.Series([name]))[0] == 0


def test_amd_names_never_use_nvidia_rules() -> None:
    # NVIDIA's name patterns (884, nvjet) and negatives (sgemm) say nothing on AMD; a
    # matrix product named in a matrix-core type (a Triton FP8 matmul) does.
    names = pd.Series(
        ["volta_h884gemm_256x128_ldg8_nn", "nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NTN",
         "volta_sgemm_128x64_nn", "Cijk_Ailk_Bljk_SB_MT64x16x32_MI16x16x4x1",
         "_w8a8_block_fp8_matmul"]
    )  # fmt: skip
    assert tensorcores.name_evidence(names, "amd").tolist() == [0, 0, 0, 1, 1]


def _kernels(names: list[str], durs: list[float]) -> pd.DataFrame:
    k = empty_table("kernels")
    rows = pd.DataFrame({"name": names, "dur": durs})
    k = pd.concat([k, rows], ignore_index=True)
    k["op_index"] = -1
    return k


def test_classify_basis_and_vendor_rules() -> None:
    k = _kernels(["ampere_sgemm_128x64_nn", "sm80_xmma_gemm_tf32f32_tf32f32_f32"], [10.0, 30.0])
    ops = empty_table("cpu_ops")
    r = tensorcores.classify(k, ops, vendor="nvidia", compute_capability="8.0")
    assert r.basis == "kernel_names" and r.flags.tolist() == [False, True]
    old = tensorcores.classify(k, ops, vendor="nvidia", compute_capability="6.1")
    assert not old.flags.any() and "6.1" in old.how
    unk = tensorcores.classify(k, ops, vendor="unknown", compute_capability=None)
    assert unk.basis == "unknown"


def test_classify_measured_counters() -> None:
    k = _kernels(["opaque_a", "opaque_b"], [10.0, 30.0])
    counters = pd.DataFrame(
        {
            "rank": [0, 0],
            "device": ["0", "0"],
            "name": ["opaque_a", "opaque_b"],
            "ts": [0.0, 1.0],
            "metric": ["sm__pipe_tensor_op_hmma_cycles_active.sum"] * 2,
            "value": [1000.0, 0.0],
        }
    )
    r = tensorcores.classify(
        k, empty_table("cpu_ops"), vendor="nvidia", compute_capability="8.0", counters=counters
    )
    assert r.basis == "measured" and r.flags.tolist() == [True, False]


@pytest.mark.parametrize(
    ("name", "mem", "model"),
    [
        ("Tesla V100-SXM2-32GB", None, "V100 SXM2"),
        ("Tesla V100-PCIE-16GB", None, "V100 PCIe"),
        ("NVIDIA A100-SXM4-40GB", None, "A100 40GB"),
        ("NVIDIA A100-PCIE-40GB", None, "A100 40GB"),
        ("NVIDIA A100-SXM4-80GB", None, "A100 80GB SXM"),
        ("NVIDIA A100 80GB PCIe", None, "A100 80GB PCIe"),
        ("NVIDIA A100-PG509-200", 42_297_524_224, "A100 40GB"),
        ("NVIDIA H100 80GB HBM3", None, "H100 SXM"),
        ("NVIDIA H100 PCIe", None, "H100 PCIe"),
        ("NVIDIA H200", None, "H200 SXM"),
        ("NVIDIA B200", None, "B200"),
        ("NVIDIA L4", None, "L4"),
        ("Tesla T4", None, "T4"),
        ("NVIDIA A10", None, "A10"),
        ("NVIDIA GeForce RTX 4090", None, "RTX 4090"),
        ("Tesla V100-DGXS-32GB", None, "V100 DGXS"),
        ("NVIDIA GeForce RTX 2080 Ti", None, "RTX 2080 Ti"),
        ("NVIDIA H800", None, "H800 SXM"),
        ("NVIDIA H800 PCIe", None, "H800 PCIe"),
    ],
)
def test_peak_lookup(name: str, mem: int | None, model: str) -> None:
    p = peaks.lookup(name, mem)
    assert p is not None and p.model == model
    assert p.mem_gbps > 0 and p.source


@pytest.mark.parametrize(
    "name",
    [
        "NVIDIA A10G",
        "NVIDIA A100-SXM4",
        "Tesla V100S-PCIE-32GB",
        "NVIDIA H100 NVL",
        "Quadro X",
        "NVIDIA GeForce RTX 2080 Ti Laptop GPU",
    ],
)
def test_peak_lookup_unknown_is_none(name: str) -> None:
    assert peaks.lookup(name) is None


def test_peak_lookup_amd_is_none() -> None:
    assert peaks.lookup("NVIDIA H100 80GB HBM3", vendor="amd") is None


def test_peak_values_from_datasheets() -> None:
    h100 = peaks.lookup("NVIDIA H100 80GB HBM3")
    assert h100 is not None
    assert (h100.tflops["bf16"], h100.tflops["fp8"], h100.mem_gbps) == (989.5, 1979.0, 3350.0)
    a100 = peaks.lookup("NVIDIA A100-SXM4-80GB")
    assert a100 is not None
    assert (a100.tflops["tf32"], a100.tflops["bf16"], a100.mem_gbps) == (156.0, 312.0, 2039.0)
    v100 = peaks.lookup("Tesla V100-SXM2-16GB")
    assert v100 is not None and "tf32" not in v100.tflops  # Volta has no TF32
    # DGX Station: 500 mixed-precision TFLOPS over four V100s.
    dgxs = peaks.lookup("Tesla V100-DGXS-32GB")
    assert dgxs is not None and (dgxs.tflops["fp16"] * 4, dgxs.tflops["fp32"]) == (500.0, 15.7)
    ti = peaks.lookup("NVIDIA GeForce RTX 2080 Ti")
    assert ti is not None and (ti.tflops["fp32"], ti.tflops["fp16"], ti.mem_gbps) == (
        13.4,
        53.8,
        616.0,
    )
    assert "bf16" not in ti.tflops  # Turing has no BF16
    h800 = peaks.lookup("NVIDIA H800")
    assert h800 is not None and (h800.tflops["bf16"], h800.tflops["fp64"]) == (989.5, 1.0)
    mi300x = peaks.lookup("AMD Instinct MI300X", vendor="amd")
    assert mi300x is not None
    assert (mi300x.tflops["bf16"], mi300x.tflops["fp8"], mi300x.mem_gbps) == (
        1307.4,
        2614.9,
        5300.0,
    )


def test_matmul_flops_and_bytes() -> None:
    assert matmul_flops("aten::mm", "[[8, 4], [4, 2]]") == 2 * 8 * 4 * 2
    assert matmul_flops("aten::bmm", "[[3, 8, 4], [3, 4, 2]]") == 3 * 2 * 8 * 4 * 2
    assert matmul_flops("aten::linear", "[[5, 8, 4], [2, 4], [2]]") == 2 * 40 * 4 * 2
    assert np.isnan(matmul_flops("aten::add", "[[8, 4], [8, 4]]"))
    nbytes, dtype = op_bytes_dtype(
        "aten::mm", "[[8, 4], [4, 2]]", '["c10::BFloat16", "c10::BFloat16"]'
    )
    assert (nbytes, dtype) == ((8 * 4 + 4 * 2 + 8 * 2) * 2, "bf16")
    nbytes, dtype = op_bytes_dtype(
        "aten::add", "[[8, 4], [8, 4], []]", '["float", "float", "Scalar"]'
    )
    assert (nbytes, dtype) == ((32 + 32 + 32) * 4, "fp32")


def test_copy_rate_over_a_subnormal_duration_is_unknown_not_infinite() -> None:
    rows = {"rank": [0, 0], "device": ["0", "0"], "stream": [7, 7], "name": ["Memcpy HtoD"] * 2}
    rows |= {"ts": [0.0, 10.0], "dur": [5e-324, 2.0], "bytes": [3000, 4000]}
    rows |= {"kind": ["HtoD", "DtoH"], "src": ["Pinned", "Device"], "dst": ["Device", "Pinned"]}
    mc = pd.DataFrame(rows)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's overflow RuntimeWarning would fail here
        out = copies_table(mc).set_index("kind")
    assert np.isnan(out.loc["HtoD", "gbps"])  # like a zero-length copy: no rate to tell
    assert out.loc["DtoH", "gbps"] == pytest.approx(4000 / 2.0 / 1e3)


def test_outermost_flops_ops_per_thread() -> None:
    from nbprof.analysis.roofline import outermost_flops_ops

    # Thread (1, 1): [0, 10) holds [2, 5) and [5, 12)'s start 5 < 10, so both are nested;
    # [20, 30) starts after every earlier end (max 12), so it is outermost. Thread (1, 2):
    # [3, 4) starts inside thread 1's op, but on another thread: outermost. The op at 40
    # has no known end: it holds nothing, so [41, 42) is outermost too.
    ops = pd.DataFrame(
        {
            "rank": np.zeros(7, dtype="int32"),
            "pid": [1, 1, 1, 1, 1, 1, 1],
            "tid": [1, 1, 2, 1, 1, 1, 1],
            "ts": [5.0, 0.0, 3.0, 20.0, 2.0, 40.0, 41.0],
            "dur": [7.0, 10.0, 1.0, 10.0, 3.0, np.nan, 1.0],
            "flops": [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
        },
        index=[10, 11, 12, 13, 14, 15, 16],
    )
    got = outermost_flops_ops(ops)
    assert got.index.tolist() == [11, 13, 15, 16, 12]


def test_flop_ops_are_the_outermost_counted_ops() -> None:
    from nbprof.analysis.roofline import flop_ops, outermost_flops_ops, with_flops

    base = {
        "rank": np.zeros(5, dtype="int32"),
        "pid": [1, 1, 1, 1, 2],
        "tid": [1, 1, 1, 2, 1],
        "name": ["aten::linear", "aten::addmm", "aten::relu", "aten::mm", "aten::mm"],
        "ts": [0.0, 1.0, 20.0, 3.0, 4.0],
        "dur": [10.0, 5.0, 1.0, 2.0, np.nan],
        "input_dims": [
            "[[4, 8], [16, 8]]",
            "[[16], [4, 8], [8, 16]]",
            "[[4]]",
            "",
            "[[2, 3], [3, 4]]",
        ],
        "input_types": ['["float", "float"]'] * 5,
    }
    for flops, estimated in (([0.0] * 5, True), ([5.0, 0.0, 1.0, 2.0, np.nan], False)):
        # Text held as object, as the reader holds it, and as pandas' own text type.
        for text in (object, "str"):
            cols = {c: pd.Series(v, dtype=text) if isinstance(v[0], str) else v
                    for c, v in base.items()}  # fmt: skip
            ops = pd.DataFrame({**cols, "flops": np.array(flops)})
            ops.index = [7, 3, 9, 1, 5]
            got, est = flop_ops(ops)
            cand, want_est = with_flops(ops)
            want = outermost_flops_ops(cand)
            assert est == want_est == estimated
            assert len(got) == (2 if estimated else 3)
            pd.testing.assert_frame_equal(got.reset_index(drop=True), want.reset_index(drop=True))


def test_stream_gaps_skip_nested_events() -> None:
    from nbprof.analysis.idle import stream_gaps

    # Stream 7: [0, 10) holds [2, 4); the next event starts at 15, so the one gap is
    # [10, 15) (not [4, 15)), launched at 12 > 10: host_wait. Stream 9 (listed first,
    # out of time order): [5, 6) then [100, 101), launched at 1 < 6 and 100 - 6 = 94 µs
    # >= KERNEL_WAIT_US: other.
    ev = pd.DataFrame(
        {
            "rank": np.zeros(5, dtype="int32"),
            "device": ["0"] * 5,
            "stream": [9, 7, 7, 9, 7],
            "ts": [100.0, 2.0, 0.0, 5.0, 15.0],
            "dur": [1.0, 2.0, 10.0, 1.0, 1.0],
            "launch_ts": [1.0, 0.0, 0.0, 0.0, 12.0],
        }
    )
    ev["end"] = ev["ts"] + ev["dur"]
    g = stream_gaps(ev)
    assert g["stream"].tolist() == [7, 9]
    assert g["start"].tolist() == [10.0, 6.0] and g["end"].tolist() == [15.0, 100.0]
    assert g["cause"].tolist() == ["host_wait", "other"]


def test_top_kernels_by_name() -> None:
    from nbprof.analysis.classes import top_kernels

    # "b" ran 3 + 4 = 7 µs, "a" 5, "c" 1: total 13. "b"'s class is its first launch's.
    k = pd.DataFrame({"name": ["a", "b", "c", "b"], "dur": [5.0, 3.0, 1.0, 4.0]})
    cls = pd.DataFrame(
        {
            "cls": ["memory", "compute", "other", "tensor_core"],
            "tensor_core": [False, False, False, True],
        }
    )
    t = top_kernels(k, cls)
    assert t["name"].tolist() == ["b", "a", "c"]
    assert t["count"].tolist() == [2, 1, 1] and t["total_us"].tolist() == [7.0, 5.0, 1.0]
    assert t["mean_us"].tolist() == [3.5, 5.0, 1.0]
    assert t["pct"].tolist() == [7.0 / 13 * 100.0, 5.0 / 13 * 100.0, 1.0 / 13 * 100.0]
    assert t["cls"].tolist() == ["compute", "memory", "other"]
    assert t["tensor_core"].tolist() == [True, False, False]
    assert top_kernels(k, cls, n=1)["name"].tolist() == ["b"]
