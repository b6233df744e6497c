from typing import Any

from nbprof.trace.scan import Buffer

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
        list[str],
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
def texts(data: Buffer, start: Any, stop: Any) -> list[str]: ...
