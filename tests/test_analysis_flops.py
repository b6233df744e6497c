"""FLOPs from shapes: convolutions forward and backward, and how much of the GPU's work a
FLOP rate speaks for. Hand-built traces with the answers as formulas, then the corpus."""

from __future__ import annotations

from pathlib import Path

import pytest
from golden import KinetoBuilder, read_trace

from nbprof.analysis import analyze
from nbprof.analysis.model import Diagnosis

CONV_KERNEL = "void cudnn::cnn::conv2d_grouped_direct_kernel<float>"
MM_KERNEL = "ampere_sgemm_128x64_nn"
F = ["float"] * 3


def conv(n: int, c_out: int, out: tuple[int, ...], c_in_per_group: int, k: tuple[int, ...]) -> int:
    """2 · N · C_out · prod(out) · C_in/groups · prod(kernel)."""
    prod = 1
    for x in (*out, *k):
        prod *= x
    return 2 * n * c_out * c_in_per_group * prod


def diagnose(b: KinetoBuilder, tmp_path: Path) -> Diagnosis:
    return analyze(read_trace(b.write(tmp_path)))


def _flops(d: Diagnosis) -> dict[str, float]:
    r = d.ops_roofline
    return dict(zip(r["op"], r["flops"], strict=True))


def _op(b: KinetoBuilder, name: str, ts: float, dims: list[object], kernel_us: float) -> None:
    """An op of 30 µs launching one kernel of ``kernel_us`` on the GPU."""
    b.cpu_op(name, ts, 30, dims=dims, types=F)
    b.kernel(CONV_KERNEL if "conv" in name else MM_KERNEL, ts + 50, kernel_us, launch_ts=ts + 5)


def test_forward_convolution_takes_its_output_size_from_the_backward_op(tmp_path: Path) -> None:
    # A 3x3 convolution of stride 2: 8x8 in, 4x4 out, which only the backward op records.
    b = KinetoBuilder()
    _op(b, "aten::conv2d", 0, [[2, 4, 8, 8], [6, 4, 3, 3], [6], [], [], [], []], 10)
    _op(b, "aten::convolution_backward", 100, [[2, 6, 4, 4], [2, 4, 8, 8], [6, 4, 3, 3]], 20)
    f = _flops(diagnose(b, tmp_path))
    once = conv(2, 6, (4, 4), 4, (3, 3))
    assert f["aten::conv2d"] == once
    # Input and weight gradients, each the forward's work.
    assert f["aten::convolution_backward"] == 2 * once


def test_groups_come_from_the_weights_second_dimension(tmp_path: Path) -> None:
    # Depthwise: 4 groups of one channel each (weight [4, 1, 3, 3]), stride 1, same size.
    b = KinetoBuilder()
    _op(b, "aten::conv2d", 0, [[2, 4, 8, 8], [4, 1, 3, 3]], 10)
    _op(b, "aten::convolution_backward", 100, [[2, 4, 8, 8], [2, 4, 8, 8], [4, 1, 3, 3]], 20)
    f = _flops(diagnose(b, tmp_path))
    assert f["aten::conv2d"] == conv(2, 4, (8, 8), 1, (3, 3))


def test_old_style_backward_counts_the_gradients_that_ran(tmp_path: Path) -> None:
    # cuDNN-era traces: (input, grad_output, weight), the gradients as nested ops. The
    # first layer computes no input gradient: only its backward_weight op runs.
    b = KinetoBuilder()
    dims = [[2, 3, 16, 16], [2, 8, 8, 8], [8, 3, 3, 3]]
    b.cpu_op("aten::cudnn_convolution_backward", 0, 100, dims=dims, types=F)
    b.cpu_op(
        "aten::cudnn_convolution_backward_weight", 10, 80, dims=[[], dims[1], dims[0]], types=F
    )
    b.kernel(CONV_KERNEL, 200, 40, launch_ts=20)
    dims2 = [[2, 8, 8, 8], [2, 8, 8, 8], [8, 8, 3, 3]]
    b.cpu_op("aten::cudnn_convolution_backward", 300, 100, dims=dims2, types=F)
    b.cpu_op(
        "aten::cudnn_convolution_backward_input", 305, 40, dims=[[], dims2[1], dims2[2]], types=F
    )
    b.cpu_op(
        "aten::cudnn_convolution_backward_weight", 350, 40, dims=[[], dims2[1], dims2[0]], types=F
    )
    b.kernel(CONV_KERNEL, 500, 40, launch_ts=310)
    r = diagnose(b, tmp_path).ops_roofline
    assert r["flops"].sum() == conv(2, 8, (8, 8), 3, (3, 3)) + 2 * conv(2, 8, (8, 8), 8, (3, 3))


def test_transposed_convolution_works_per_input_element(tmp_path: Path) -> None:
    b = KinetoBuilder()
    _op(b, "aten::conv_transpose2d", 0, [[1, 8, 4, 4], [8, 3, 2, 2]], 10)
    f = _flops(diagnose(b, tmp_path))
    # 2 · N · C_in · prod(input) · C_out/groups · prod(kernel)
    assert f["aten::conv_transpose2d"] == 2 * 1 * 8 * 16 * 3 * 4


def test_an_output_size_the_trace_does_not_settle_is_not_guessed(tmp_path: Path) -> None:
    b = KinetoBuilder()
    # Inference: no backward op says how large the output is.
    _op(b, "aten::conv2d", 0, [[2, 4, 8, 8], [6, 4, 3, 3]], 30)
    # The same input and weight shapes with two output sizes (stride 1 and stride 2).
    _op(b, "aten::conv2d", 200, [[2, 4, 16, 16], [6, 4, 3, 3]], 30)
    _op(b, "aten::convolution_backward", 400, [[2, 6, 16, 16], [2, 4, 16, 16], [6, 4, 3, 3]], 30)
    _op(b, "aten::convolution_backward", 600, [[2, 6, 8, 8], [2, 4, 16, 16], [6, 4, 3, 3]], 30)
    _op(b, "aten::mm", 800, [[64, 32], [32, 16]], 10)
    d = diagnose(b, tmp_path)
    f = _flops(d)
    assert "aten::conv2d" not in f
    assert f["aten::mm"] == 2 * 64 * 32 * 16
    m = d.devices[0]
    # Kernel time 30+30+30+30+10 = 130 µs; the backward ops' 60 and the mm's 10 are counted.
    assert m.flops_coverage_pct == pytest.approx(70 / 130 * 100)
    assert "FLOPs known for 54% of kernel time" in m.basis["achieved_tflops"].how


# -- the corpus ---------------------------------------------------------------------------


def resnet50_forward_macs(batch: int) -> tuple[int, int]:
    """Multiply-adds of torchvision's ResNet-50 convolutions at 224x224 (stride in the 3x3
    convolution, v1.5), and those of its first convolution alone."""

    def conv_macs(c_in: int, c_out: int, k: int, h_out: int) -> int:
        return c_in * c_out * k * k * h_out * h_out

    first = conv_macs(3, 64, 7, 112)
    total, h, c_in = first, 56, 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            h_out = h // (stride if i == 0 else 1)
            total += conv_macs(c_in, width, 1, h) + conv_macs(width, width, 3, h_out)
            total += conv_macs(width, 4 * width, 1, h_out)
            if i == 0:
                total += conv_macs(c_in, 4 * width, 1, h_out)  # the downsampling shortcut
            c_in, h = 4 * width, h_out
    return batch * total, batch * first


@pytest.mark.corpus
def test_corpus_resnet50_convolution_flops_match_the_architecture(corpus: Path) -> None:
    """kineto's V100 ResNet-50 (batch 32, 6 steps, no with_flops): 4.09 GMACs forward per
    image. A training step does it three times (forward, input and weight gradients),
    less the first layer's input gradient, which autograd skips."""
    t = read_trace(
        corpus / "kineto-tbplugin__resnet50_num_workers_0__worker0.1623143089861.pt.trace.json.gz"
    )
    d = analyze(t)
    r = d.ops_roofline
    forward, first = resnet50_forward_macs(32)
    assert forward / 32 == pytest.approx(4.09e9, rel=1e-3)
    per_step = 2 * (3 * forward - first)
    convs = r[r["op"].str.contains("conv")]
    assert float(convs["flops"].sum()) / len(t.steps) == pytest.approx(per_step, rel=1e-9)
    m = d.devices[0]
    # 6 steps' FLOPs over the 996.5 ms GPU span: about 4.7 TFLOP/s of the V100's 15.7
    # FP32 peak, no longer 2.4 GFLOP/s of the linear layers alone.
    assert m.achieved_tflops == pytest.approx(6 * per_step / m.gpu_span_us / 1e6, rel=0.01)
    assert 4.0 < m.achieved_tflops < 5.0
    assert m.peak_tflops == 15.7
    assert set(convs["bound"]) == {"compute"}
    # Convolutions and matmuls launch 68% of kernel time; batch norm, ReLU, the
    # optimizer launch the rest.
    assert 60 < (m.flops_coverage_pct or 0) < 75
