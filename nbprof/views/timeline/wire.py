"""A timeline's payload as it travels in the page: one base64 text of deflated parts.

A dashboard output carries its Bokeh document and its timeline document (document.py) in a
``<script>`` element; js/wire.mjs unpacks it. The text is the base64 of::

    b"NBPK" | uint32 count | uint32 length of each part | the parts

all little-endian, where part 0 is the header, a JSON object deflated, and every other
part is one column's values, deflated; a column in the header names its part
(``"part": k``) and whether its bytes were shuffled (``"shuffle"``, 1 or 0: for values of more
than one byte, all first bytes, then all second bytes, ...: numbers that are small or
close to each other then leave long runs of equal bytes, which deflate compresses better).
Each column is shuffled or not, whichever deflates smaller.

Against a JSON document whose columns are each deflated into base64 (the format before),
base64 is paid once, the header (Bokeh's document, the lanes, the labels) is deflated too,
and shuffling saves a fifth on the synthetic traces of benchmarks/bench_timeline.py.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from typing import Any

import numpy as np

#: The first four bytes of a pack (js/wire.mjs refuses anything else).
MAGIC = b"NBPK"
#: zlib level of a part, and of one over LARGE_BYTES raw. Measured on the synthetic traces
#: of benchmarks/bench_timeline.py: at 10k kernels, level 6 makes the document 4% smaller
#: than level 2 in 25 ms; at 1M kernels, 8% smaller but in 2.9 s instead of 0.6 s (level
#: 9: 10% in 15 s), which a build of that size should not wait for.
DEFLATE_LEVEL = 6
DEFLATE_LEVEL_LARGE = 2
LARGE_BYTES = 1 << 20
#: A column this large is shuffled or not as its first SAMPLE_BYTES deflate best (trying
#: both ways on all of it would double the cost of the largest parts).
SAMPLE_BYTES = 1 << 18


def shuffled(raw: bytes, itemsize: int) -> bytes:
    """``raw`` (values of ``itemsize`` bytes) as byte planes: every value's first byte,
    then every value's second byte, ..."""
    if itemsize == 1:
        return raw
    return np.frombuffer(raw, np.uint8).reshape(-1, itemsize).T.tobytes()


def _deflate(data: bytes) -> bytes:
    return zlib.compress(data, DEFLATE_LEVEL if len(data) <= LARGE_BYTES else DEFLATE_LEVEL_LARGE)


def column_part(values: np.ndarray) -> tuple[bytes, bool]:
    """A column's values as one deflated part (little-endian), and whether it is shuffled."""
    data = np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("<"))
    raw = data.tobytes()
    k = data.dtype.itemsize
    if k == 1 or not len(raw):
        return _deflate(raw), False
    if len(raw) > LARGE_BYTES:
        head = raw[: SAMPLE_BYTES - SAMPLE_BYTES % k]
        shuffle = len(zlib.compress(shuffled(head, k), 1)) < len(zlib.compress(head, 1))
        return _deflate(shuffled(raw, k) if shuffle else raw), shuffle
    plain, planes = _deflate(raw), _deflate(shuffled(raw, k))
    return (planes, True) if len(planes) < len(plain) else (plain, False)


def pack(header: dict[str, Any], parts: list[bytes]) -> str:
    """The pack of ``header`` (JSON-able; its columns name parts 1..len(parts)) and the
    deflated ``parts``, as base64 text."""
    text = json.dumps(header, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
    every = [_deflate(text.encode("utf-8")), *parts]
    head = MAGIC + struct.pack(f"<{len(every) + 1}I", len(every), *map(len, every))
    return base64.b64encode(head + b"".join(every)).decode("ascii")


def unpack(text: str) -> tuple[dict[str, Any], list[bytes]]:
    """``pack``'s header and its parts, inflated (what js/wire.mjs does, for the tests)."""
    data = base64.b64decode(text)
    if data[:4] != MAGIC:
        raise ValueError("not an nbprof pack")
    (n,) = struct.unpack_from("<I", data, 4)
    sizes = struct.unpack_from(f"<{n}I", data, 8)
    at = 8 + 4 * n
    out = []
    for size in sizes:
        out.append(zlib.decompress(data[at : at + size]))
        at += size
    return json.loads(out[0]), out[1:]
