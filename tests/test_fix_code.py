"""The code a finding suggests as its fix is valid Python on current torch APIs."""

from __future__ import annotations

import ast
from pathlib import Path

from golden import KinetoBuilder, read_trace

from nbprof.analysis import analyze

SGEMM = "volta_sgemm_128x64_nn"


def test_fp16_autocast_fix_uses_the_current_grad_scaler(tmp_path: Path) -> None:
    # A Volta GPU (no TF32, no bf16) running its GEMMs in FP32: the fix is FP16 autocast
    # with a gradient scaler, spelled as torch spells it now (torch.cuda.amp's is deprecated).
    b = KinetoBuilder(device_name="Tesla V100-SXM2-32GB", major=7, minor=0, sm_count=80)
    b.kernel(SGEMM, 0, 900)
    b.kernel("void at::native::vectorized_elementwise_kernel<4>", 900, 100, launch_ts=50)
    d = analyze(read_trace(b.write(tmp_path)))
    f = {x.id: x for x in d.findings}["low_tensor_core_share"]
    code = f.code or ""
    assert 'scaler = torch.amp.GradScaler("cuda")' in code
    assert "torch.cuda.amp" not in code
    ast.parse(code)


def test_the_grad_scaler_the_fix_names_exists_in_torch() -> None:
    import warnings

    import torch

    with warnings.catch_warnings():
        # Without CUDA torch warns that the scaler is disabled; the constructor is the check.
        warnings.simplefilter("ignore")
        scaler = torch.amp.GradScaler("cuda")
    assert isinstance(scaler, torch.amp.GradScaler)
