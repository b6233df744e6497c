from typing import Any

Buffer = bytes | bytearray | memoryview

def scan(
    data: Buffer,
    start: int,
    stop: int,
    cat_codes: dict[bytes, int],
    phase_codes: dict[bytes, int],
    unescape: Any,
) -> (
    tuple[
        bytearray,
        bytearray,
        list[str],
        bytearray,
        bytearray,
        bytearray,
        bytearray,
        bytearray,
        bytearray,
        bytearray,
        list[tuple[int, int, str]],
    ]
    | None
): ...
def join(data: Buffer, start: Any, stop: Any) -> bytes: ...
def fields(
    data: Buffer, start: Any, stop: Any, keys: tuple[bytes, ...]
) -> tuple[tuple[bytearray, bytearray, bytearray, bytearray, bytearray], ...] | None: ...
def texts(data: Buffer, start: Any, stop: Any) -> tuple[bytearray, list[str]]: ...
def nest(pid: Any, tid: Any, starts: Any, ends: Any, depth: Any, parent: Any) -> bool: ...
def innermost(
    pid: Any,
    tid: Any,
    starts: Any,
    ends: Any,
    parent: Any,
    q_pid: Any,
    q_tid: Any,
    q_t: Any,
    out: Any,
) -> bool: ...
