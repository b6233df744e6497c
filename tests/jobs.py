"""Hand-built multi-rank jobs whose every number a test can write as a formula.

``four_rank_job`` writes 4 rank files of one step. Every rank computes for 900 µs before
each of three collectives; rank 2's host is late by ``D`` µs before each (a CPU op with
nothing queued), so it arrives ``D`` after the others, which wait for it inside the
collective. Once all four are there, the data moves in ``T`` µs. The collectives carry
PyTorch's metadata on ``record_param_comms`` (name, sizes, dtype, group, sequence number).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.golden import KinetoBuilder

D = 1500.0  # how late rank 2 arrives at each collective (µs)
T = 100.0  # how long the data takes to move once every rank is there (µs)
STRAGGLER = 2
#: (fast ranks' arrival µs, kind, PyTorch's name, in nelems, out nelems) per collective.
CALLS: tuple[tuple[float, str, str, int, int], ...] = (
    (2000.0, "all_reduce", "allreduce", 1 << 20, 1 << 20),
    (5000.0, "all_gather", "_allgather_base", 1 << 18, 1 << 20),
    (8000.0, "all_reduce", "allreduce", 1 << 18, 1 << 18),
)
KERNELS = {
    "all_reduce": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
    "all_gather": "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
}
WORLD = 4
STEP_US = 10_000.0


def rank_builder(
    rank: int, *, world: int = WORLD, straggler: int = STRAGGLER, python_after: float = 0.0
) -> KinetoBuilder:
    """One rank's file. ``python_after``: after the last collective (which ends at 9600),
    ``python_after`` µs of host Python with nothing queued, then a last 900 µs GEMM."""
    b = KinetoBuilder()
    b.step(1, 0.0, STEP_US)
    late = D if rank == straggler else 0.0
    for seq, (t, kind, name, n_in, n_out) in enumerate(CALLS):
        if late:
            # The host is busy in Python with nothing queued: the GPU idles, then runs late.
            b.cpu_op("slow_python_step", t - 1000.0 - 20.0, late)
        b.kernel("volta_sgemm_128x64_nn", t - 1000.0 + late, 900.0, grid=(160, 1, 1))
        start = t + late
        b.cpu_op("record_param_comms", start - 10.0, 8.0)
        b.events[-1]["args"].update(
            {
                "Collective name": name,
                "In msg nelems": n_in,
                "Out msg nelems": n_out,
                "dtype": "Float",
                "Group size": world,
                "Process Group Name": "0",
                "Process Group Ranks": list(range(world)),
                "Seq": seq,
            }
        )
        # Launched inside record_param_comms (at start - 5); every rank's kernel ends when
        # the last one has arrived and the data has moved.
        b.kernel(KERNELS[kind], start, (t + D + T) - start, launch_dur=2.0, stream=20,
                 grid=(8, 1, 1))  # fmt: skip
    if python_after:
        end = CALLS[-1][0] + D + T
        b.cpu_op("slow_python_step", end, python_after - 10.0)
        b.kernel("volta_sgemm_128x64_nn", end + python_after, 900.0, grid=(160, 1, 1))
    return b


def write_job(
    folder: Path,
    *,
    world: int = WORLD,
    ranks: list[int] | None = None,
    info: dict[int, dict[str, Any] | None] | None = None,
    python_after: float = 0.0,
) -> list[Path]:
    """Write the job's rank files (``info[r]`` replaces rank r's distributedInfo; None
    leaves it out; ``python_after``: see :func:`rank_builder`)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for r in ranks if ranks is not None else range(world):
        doc = rank_builder(r, world=world, python_after=python_after).document()
        di: dict[str, Any] | None = {"backend": "nccl", "rank": r, "world_size": world}
        if info and r in info:
            di = info[r]
        if di is not None:
            doc["distributedInfo"] = di
        path = folder / f"rank{r}.json"
        path.write_text(json.dumps(doc))
        out.append(path)
    return out


def late_start_builder(rank: int, *, late: float, gained: float) -> KinetoBuilder:
    """One rank of a job whose rank 2 starts its window ``late`` µs after the others, and
    is as fast as they are until the second collective, before which its host spends
    ``gained`` µs more in Python. Each rank: a 900 µs GEMM 1000 µs before each collective.
    The others wait ``late`` at the first, ``gained`` at the second, none at the third:
    after each wait their work follows the collective they waited in, in step with rank 2."""
    b = KinetoBuilder()
    straggler = rank == STRAGGLER
    b.step(1, late if straggler else 0.0, STEP_US)
    for seq, (t, kind, name, n_in, n_out) in enumerate(CALLS):
        # The last arrival (rank 2) is late by ``late``, then by ``late + gained`` from the
        # second collective; the others arrive on time at the first, and then as late as
        # the collective before ended for them.
        last = t + late + (gained if seq >= 1 else 0.0)
        mine = (
            last if straggler else t + (late if seq >= 1 else 0.0) + (gained if seq >= 2 else 0.0)
        )
        if straggler and seq == 1:
            b.cpu_op("slow_python_step", mine - 1000.0 - gained - 20.0, gained)
        b.kernel("volta_sgemm_128x64_nn", mine - 1000.0, 900.0, grid=(160, 1, 1))
        b.cpu_op("record_param_comms", mine - 10.0, 8.0)
        b.events[-1]["args"].update(
            {
                "Collective name": name,
                "In msg nelems": n_in,
                "Out msg nelems": n_out,
                "dtype": "Float",
                "Group size": WORLD,
                "Process Group Name": "0",
                "Process Group Ranks": list(range(WORLD)),
                "Seq": seq,
            }
        )
        b.kernel(KERNELS[kind], mine, last + T - mine, launch_dur=2.0, stream=20,
                 grid=(8, 1, 1))  # fmt: skip
    return b


def write_late_start_job(folder: Path, *, late: float, gained: float) -> list[Path]:
    """The job of :func:`late_start_builder`, one file per rank."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for r in range(WORLD):
        doc = late_start_builder(r, late=late, gained=gained).document()
        doc["distributedInfo"] = {"backend": "nccl", "rank": r, "world_size": WORLD}
        path = folder / f"rank{r}.json"
        path.write_text(json.dumps(doc))
        out.append(path)
    return out


# -- functions for nbprof.parallel's tests (module level: worker processes import them) ----


def square(x: int) -> int:
    if x < 0:
        raise ValueError(f"negative: {x}")
    return x * x


def die_on(x: int) -> int:
    """Kills its own process for x == 13 (as an out-of-memory kill would), else squares."""
    import os

    if x == 13:
        os._exit(17)
    return x * x


def die_once(task: tuple[str, int]) -> int:
    """Kills its process the first time it runs (a marker file remembers), then squares."""
    import os

    marker, x = task
    if not os.path.exists(marker):
        with open(marker, "w") as f:
            f.write("died")
        os._exit(17)
    return x * x


def refault_pages(mib: int) -> int:
    """Page faults of filling a buffer of ``mib`` MiB made right after one of that size was
    freed: about one per 4 KiB page when freed memory went back to the system."""
    import resource

    bytearray(mib << 20)  # made, filled with zeros and freed
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    buf = bytearray(mib << 20)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    del buf
    return faults
