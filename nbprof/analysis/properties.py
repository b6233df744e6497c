"""Which ``deviceProperties`` entry describes a device's GPU events, and how that was decided.

Kineto keys the entries by the device's index in the process, and CUDA traces' GPU events
carry the same index. ROCm traces need not: their events may carry the physical GPU's id
(2, 9) while the one entry the process wrote is id 0. An event device without an entry of
its own is given an entry only when the pairing is unambiguous: it is the only such device
of its rank, and every entry no event device claims describes one and the same GPU.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd

from nbprof.analysis import _frames, _group

logger = logging.getLogger(__name__)

#: The fields that say which GPU an entry describes (the entry's id aside).
_WHAT = ("name", "vendor", "sm_count", "compute_capability", "total_memory", "max_threads_per_sm")


def _text(d: pd.DataFrame) -> np.ndarray:
    dev = _frames.column(d, "device")
    if dev.dtype == object and _group.all_text(dev):
        return dev
    return d["device"].astype(str).to_numpy()


def _described(row: dict[str, Any]) -> bool:
    """The row holds properties (the reader adds empty rows for devices seen only in events)."""
    return (
        bool(row.get("name"))
        or int(row.get("sm_count", -1) or -1) > 0
        or (int(row.get("total_memory", -1) or -1) > 0)
    )


def _ids(ids: list[str]) -> str:
    return ", ".join(ids) if len(ids) < 5 else f"{ids[0]} to {ids[-1]}"


def properties_of(
    devices: pd.DataFrame,
    rank: int,
    device: str,
    event_devices: Callable[[], Iterable[str]],
) -> tuple[dict[str, Any], str]:
    """The properties row for ``device`` of ``rank`` ({} when none) and, when the row is
    another id's entry, how it was paired ("" when the device has its own).

    ``event_devices`` gives the devices of the rank's GPU events (kernels, copies,
    memsets); it is called only for a device without an entry of its own.
    """
    if devices.empty:
        return {}, ""
    dev = _text(devices)
    ranks = _frames.column(devices, "rank")
    at = np.flatnonzero((ranks == rank) & (dev == device))
    if not len(at):
        at = np.flatnonzero(dev == device)
    own = _frames.row_dict(devices, int(at[0])) if len(at) else {}
    if own and _described(own):
        return own, ""
    mine = np.flatnonzero(ranks == rank)
    rows = {str(dev[i]): _frames.row_dict(devices, int(i)) for i in mine}
    seen = {str(d) for d in event_devices()}
    bare = [d for d in seen if not _described(rows.get(d, {}))]
    spare = [(d, r) for d, r in rows.items() if d not in seen and _described(r)]
    if bare != [device] or not spare:
        return own, ""
    kinds = {tuple(r.get(k) for k in _WHAT) for _, r in spare}
    if len(kinds) != 1:
        return own, ""
    ids = sorted((d for d, _ in spare), key=lambda d: (len(d), d))
    first = dict(next(r for d, r in spare if d == ids[0]))
    first["device"] = device
    which = (
        f"the one entry no event device has (id {ids[0]})"
        if len(ids) == 1
        else f"the {len(ids)} entries no event device has (ids {_ids(ids)}), which all "
        "describe the same GPU"
    )
    how = (
        f"its GPU events carry device id {device}, which no deviceProperties entry has; it is "
        f"the only such device, so it takes {which} (ROCm traces may number events by the "
        "physical GPU)"
    )
    logger.debug("device %s of rank %s: %s", device, rank, how)
    return first, how
