from typing import Any

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
