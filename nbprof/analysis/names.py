"""Names folded so that the "same" kernel or CPU op matches across two runs.

A kernel's name carries what the compiler and the library picked for this launch: template
arguments with tile sizes, vector widths and unroll factors, the GPU generation
(``volta_sgemm_128x64_nn`` on a V100 is ``ampere_sgemm_64x32_nn`` on an A100), cuBLAS's
pipeline stages (``_stages_32x5``), Triton's per-graph counters (``triton_poi_fused_add_3``),
the C++ argument list. Two runs of the same code differ in exactly these parts, so a
comparison groups kernels by the name with them folded: the architecture prefix and the
stages dropped, every number replaced by ``N``, the trailing argument list removed. The
identifiers are kept (``AddFunctor`` and ``FillFunctor`` elementwise kernels stay apart):
they say what the kernel computes.

CPU ops keep their names except where PyTorch spells one call two ways: the DataLoader's
``__next__`` is ``_SingleProcessDataLoaderIter`` with ``num_workers=0`` and
``_MultiProcessingDataLoaderIter`` otherwise, and autograd nodes gain a version digit
(``ReluBackward0``/``ReluBackward1``) between releases.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable

import numpy as np
import pandas as pd

logger = logging.getLogger(__name__)

_VOID = re.compile(r"^\s*void\s+")
# GPU generations as cuBLAS/cuDNN/CUTLASS spell them in kernel names.
_ARCH_WORD = re.compile(
    r"\b(?:maxwell|pascal|volta|turing|ampere|ada|hopper|blackwell)_", re.IGNORECASE
)
_ARCH_SM_PREFIX = re.compile(r"\bsm_?\d+[a-z]?_", re.IGNORECASE)
_ARCH_SM_SUFFIX = re.compile(r"_sm_?\d+[a-z]?\b", re.IGNORECASE)
_CUTLASS_ARCH = re.compile(r"\bcutlass_\d+_", re.IGNORECASE)
# cuBLAS's pipeline depth (Ampere and newer), a tuning choice like the tile size.
_STAGES = re.compile(r"_stages?_?\d+x\d+", re.IGNORECASE)
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_DIGITS = re.compile(r"\d+")
# From the first space of a run only: "\s+>" alone retried from every space of a run
# with no ">" after it, quadratic in the run.
_SPACE_BEFORE_CLOSE = re.compile(r"(?<!\s)\s+>")
_SPACES = re.compile(r"\s+")

_DATALOADER_ITER = re.compile(r"_(?:SingleProcess|MultiProcessing)DataLoaderIter")
_BACKWARD_VERSION = re.compile(r"Backward\d+\b")


def _strip_call_args(name: str) -> str:
    """``f<T>(int, float*)`` -> ``f<T>``: the argument list at the end, nesting included."""
    s = name.rstrip()
    if not s.endswith(")"):
        return s
    depth = 0
    for i in range(len(s) - 1, -1, -1):
        c = s[i]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth == 0:
                # "(anonymous namespace)" alone is a name part, not an argument list.
                head = s[:i].rstrip()
                return head if head else s
    return s  # unbalanced: leave it


@functools.lru_cache(maxsize=1 << 14)
def kernel_group(name: str) -> str:
    """The name a kernel is matched by across runs (see the module docstring)."""
    s = _VOID.sub("", str(name))
    s = _strip_call_args(s)
    s = _ARCH_WORD.sub("", s)
    s = _CUTLASS_ARCH.sub("cutlass_", s)
    s = _ARCH_SM_PREFIX.sub("", s)
    s = _ARCH_SM_SUFFIX.sub("", s)
    s = _STAGES.sub("", s)
    s = _HEX.sub("N", s)
    s = _DIGITS.sub("N", s)
    s = _SPACE_BEFORE_CLOSE.sub(">", s)
    return _SPACES.sub(" ", s).strip() or str(name)


@functools.lru_cache(maxsize=1 << 14)
def op_group(name: str) -> str:
    """The name a top-level CPU op is matched by across runs (see the module docstring)."""
    s = _DATALOADER_ITER.sub("_DataLoaderIter", str(name))
    return _BACKWARD_VERSION.sub("Backward", s)


def groups(names: pd.Series, fold: Callable[[str], str]) -> np.ndarray:
    """``fold`` applied to each distinct name once, as an object array aligned with ``names``."""
    if len(names) == 0:
        return np.zeros(0, dtype=object)
    codes, uniq = pd.factorize(names.astype(str), use_na_sentinel=False)
    folded = np.array([fold(str(u)) for u in uniq], dtype=object)
    return folded[codes]
