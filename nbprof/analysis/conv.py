"""Convolution FLOPs from the shapes ``record_shapes`` writes: forward and backward.

A convolution of an input ``[N, C_in, *spatial]`` with a weight ``[C_out, C_in/groups,
*kernel]`` producing ``[N, C_out, *out]`` multiplies and adds ``N · C_out · prod(out) ·
C_in/groups · prod(kernel)`` times: ``2 ·`` that many FLOPs. The weight's second
dimension is ``C_in/groups`` already, so groups (depthwise convolutions) need no value
the trace lacks. A transposed convolution (weight ``[C_in, C_out/groups, *kernel]``) does
the same work per *input* element: ``2 · N · C_in · prod(spatial) · C_out/groups ·
prod(kernel)``.

Stride, padding and dilation are values the trace's shapes do not carry, so a forward
convolution's output size is read where the trace does hold it: the backward op of a
training step records the gradient of the output (its shape is the output's) beside the
same input and weight. A forward op whose (input, weight) shapes meet exactly one output
shape among the backward ops is counted; any other is left uncounted (NaN), never
guessed. A backward op computes the input gradient and the weight gradient, each the
forward's FLOPs; cuDNN-era traces show which of the two ran as nested ops
(``cudnn_convolution_backward_input`` / ``_weight``), newer ones do not, and then both
are assumed (the first layer, whose input needs no gradient, is counted twice as much as
it ran).
"""

from __future__ import annotations

import functools
import json
import logging
import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

#: Forward convolutions at every level of the dispatch (conv2d > convolution >
#: _convolution > cudnn_convolution); the outermost one counted is the one kept.
_FORWARD = re.compile(
    r"aten::(?:conv[123]d|convolution|_convolution|_convolution_mode|cudnn_convolution|"
    r"miopen_convolution|mkldnn_convolution|_nnpack_spatial_convolution|"
    r"slow_conv2d_forward|_slow_conv2d_forward|thnn_conv2d)$"
)
_TRANSPOSED = re.compile(
    r"aten::(?:conv_transpose[123]d|cudnn_convolution_transpose|miopen_convolution_transpose|"
    r"slow_conv_transpose[23]d)$"
)
#: Backward ops with the input, the output's gradient and the weight: (grad_output,
#: input, weight) since PyTorch 1.11, (input, grad_output, weight) in cuDNN-era traces.
_BACKWARD_NEW = re.compile(r"aten::convolution_backward$")
_BACKWARD_OLD = re.compile(r"aten::(?:cudnn|miopen)_convolution_backward$")
#: The nested parts of an old-style backward op: which gradients ran.
_INPUT_GRAD = re.compile(r"aten::(?:cudnn|miopen)_convolution_backward_input$")
#: Every name this module counts (what a caller selects the candidate rows by).
NAMES = re.compile(
    "|".join(p.pattern for p in (_FORWARD, _TRANSPOSED, _BACKWARD_NEW, _BACKWARD_OLD))
)

Shape = tuple[int, ...]


@functools.lru_cache(maxsize=4096)
def _shapes(text: str) -> tuple[Shape | None, ...]:
    """Each input's shape (None for a non-tensor input). Remembered: a model repeats its
    layers' shapes every step."""
    try:
        dims = json.loads(text) if text else []
    except ValueError:
        return ()
    if not isinstance(dims, list):
        return ()
    out: list[Shape | None] = []
    for d in dims:
        ok = isinstance(d, list) and d and all(type(x) is int and x > 0 for x in d)
        out.append(tuple(d) if ok else None)
    return tuple(out)


def _valid(inp: Shape | None, weight: Shape | None) -> bool:
    """A batched input and a weight of the same rank (N, C, spatial... / Co, Ci/g, k...)."""
    return inp is not None and weight is not None and len(inp) == len(weight) >= 3


def _forward_flops(inp: Shape, weight: Shape, out: Shape) -> float:
    """2 · N · C_out · prod(out spatial) · C_in/groups · prod(kernel)."""
    n, c_out = inp[0], weight[0]
    return 2.0 * n * c_out * math.prod(out[2:]) * weight[1] * math.prod(weight[2:])


def _transposed_flops(inp: Shape, weight: Shape) -> float:
    """2 · N · C_in · prod(input spatial) · C_out/groups · prod(kernel)."""
    return 2.0 * inp[0] * inp[1] * math.prod(inp[2:]) * weight[1] * math.prod(weight[2:])


def _is_transposed(inp: Shape, grad_out: Shape, weight: Shape) -> bool | None:
    """Whether a backward op's shapes are those of a transposed convolution (None: they fit
    neither). A convolution's weight leads with the output's channels, a transposed one's
    with the input's; when both fit, a transposed convolution is the one whose output is
    larger than its input."""
    regular = weight[0] == grad_out[1] and inp[1] % weight[1] == 0
    transposed = weight[0] == inp[1] and grad_out[1] % weight[1] == 0
    if regular and transposed:
        return any(o > i for o, i in zip(grad_out[2:], inp[2:], strict=True))
    if regular or transposed:
        return transposed
    return None


def conv_flops(
    names: Sequence[str],
    dims: Sequence[str],
    ts: np.ndarray,
    end: np.ndarray,
    thread: np.ndarray,
    nested: Sequence[str] = (),
    nested_ts: np.ndarray | None = None,
    nested_thread: np.ndarray | None = None,
) -> np.ndarray:
    """FLOPs of each convolution op (NaN where the shapes cannot tell).

    ``names``/``dims`` (the ``input_dims`` text), ``ts``/``end`` and ``thread`` (one code
    per (rank, pid, tid)) describe the candidate ops; ``nested*`` the ops whose names
    say which gradient an old-style backward op computed (their starts and threads).
    """
    n = len(names)
    out = np.full(n, np.nan)
    parsed = [_shapes(d) if type(d) is str else () for d in dims]
    # Output shapes the backward ops record, by (input, weight) shape.
    outputs: dict[tuple[Shape, Shape], set[Shape]] = {}
    backward: list[tuple[int, Shape, Shape, Shape]] = []
    for i, (name, s) in enumerate(zip(names, parsed, strict=True)):
        kind = _kind(name)
        if len(s) < 3 or kind not in ("backward", "backward_old"):
            continue
        if kind == "backward":
            grad, inp, weight = s[0], s[1], s[2]
        else:
            inp, grad, weight = s[0], s[1], s[2]
        if inp is None or weight is None or grad is None:
            continue
        if not _valid(inp, weight) or len(grad) != len(weight):
            continue
        backward.append((i, inp, grad, weight))
        if _is_transposed(inp, grad, weight) is False:
            outputs.setdefault((inp, weight), set()).add(grad)
    grads = _gradients(
        [b[0] for b in backward], names, ts, end, thread, nested, nested_ts, nested_thread
    )
    for (i, inp, grad, weight), k in zip(backward, grads, strict=True):
        t = _is_transposed(inp, grad, weight)
        if t is None:
            continue
        # A transposed convolution's input-side is its output: its work per grad element.
        once = _transposed_flops(inp, weight) if t else _forward_flops(inp, weight, grad)
        out[i] = k * once
    # A model repeats its layers every step: each (kind, shapes) is worked out once.
    done: dict[tuple[str, tuple[Shape | None, ...]], float] = {}
    for i, (name, s) in enumerate(zip(names, parsed, strict=True)):
        kind = _kind(name)
        if len(s) < 2 or kind not in ("forward", "transposed"):
            continue
        key = (kind, s[:2])
        if key not in done:
            done[key] = _one_forward(kind, s[0], s[1], outputs)
        out[i] = done[key]
    return out


@functools.lru_cache(maxsize=256)
def _kind(name: str) -> str:
    """What a name is: "forward", "transposed", "backward" (PyTorch 1.11 on),
    "backward_old" (cuDNN-era) or "" (no convolution this module counts)."""
    for kind, rx in (
        ("forward", _FORWARD), ("transposed", _TRANSPOSED), ("backward", _BACKWARD_NEW),
        ("backward_old", _BACKWARD_OLD),
    ):  # fmt: skip
        if rx.match(name):
            return kind
    return ""


def _one_forward(
    kind: str,
    inp: Shape | None,
    weight: Shape | None,
    outputs: dict[tuple[Shape, Shape], set[Shape]],
) -> float:
    if inp is None or weight is None or not _valid(inp, weight):
        return math.nan
    if kind == "transposed":
        return _transposed_flops(inp, weight) if weight[0] == inp[1] else math.nan
    if inp[1] % weight[1] != 0:
        return math.nan
    seen = outputs.get((inp, weight), set())
    return _forward_flops(inp, weight, next(iter(seen))) if len(seen) == 1 else math.nan


def _gradients(
    rows: list[int],
    names: Sequence[str],
    ts: np.ndarray,
    end: np.ndarray,
    thread: np.ndarray,
    nested: Sequence[str],
    nested_ts: np.ndarray | None,
    nested_thread: np.ndarray | None,
) -> list[int]:
    """How many gradients (input, weight) each backward op computed: 1 for an old-style
    op with no input-gradient op nested in it, else 2."""
    out = [2] * len(rows)
    if not rows or nested_ts is None or nested_thread is None or not len(nested):
        return out
    keep = np.array([bool(_INPUT_GRAD.match(x)) for x in nested], dtype=bool)
    its = np.asarray(nested_ts, dtype="float64")[keep]
    ith = np.asarray(nested_thread)[keep]
    old = np.array([_kind(names[i]) == "backward_old" for i in rows], dtype=bool)
    at = np.asarray(rows)[old]
    found = np.zeros(len(at), dtype=bool)
    # Per thread, one sorted search for every op: the input-gradient ops starting inside.
    for th in np.unique(thread[at]) if len(at) else ():
        mine = thread[at] == th
        starts = np.sort(its[ith == th])
        lo = np.searchsorted(starts, ts[at[mine]], "left")
        hi = np.searchsorted(starts, end[at[mine]], "right")
        found[mine] = hi > lo
    for j, f in zip(np.flatnonzero(old).tolist(), found.tolist(), strict=True):
        out[j] = 2 if f else 1
    return out


def thread_codes(*cols: np.ndarray) -> np.ndarray:
    """One integer per distinct (rank, pid, tid) row."""
    if not cols or not len(cols[0]):
        return np.zeros(0, dtype="int64")
    keys: dict[tuple[Any, ...], int] = {}
    return np.array(
        [keys.setdefault(k, len(keys)) for k in zip(*(c.tolist() for c in cols), strict=True)],
        dtype="int64",
    )
