"""Which NVML GPU is which CUDA device: the match that lets samples describe a trace.

NVML numbers every GPU of the machine (in PCI bus order on Linux, though its documentation
says the index "may not correlate with other APIs, such as the CUDA device index"); CUDA
numbers the GPUs a process may use: those ``CUDA_VISIBLE_DEVICES`` lists, in its order,
after ``CUDA_DEVICE_ORDER`` sorted them (``FASTEST_FIRST`` by default). With
``CUDA_VISIBLE_DEVICES=2`` a trace's device 0 is NVML's GPU 2; on a box of mixed GPUs the
fastest is CUDA's 0 wherever it sits on the bus. So the index is never the match.

Evidence, strongest first (:func:`map_cuda_devices`):

1. the UUID CUDA reports for the device (``torch.cuda.get_device_properties(i).uuid``) is an
   NVML GPU's, or one of its MIG instances';
2. the PCI bus id CUDA reports is an NVML GPU's;
3. ``CUDA_VISIBLE_DEVICES`` names the device: by UUID (``GPU-…``; a unique prefix is enough,
   as CUDA accepts), by MIG instance (``MIG-<uuid>``, or the older
   ``MIG-GPU-<uuid>/<gi>/<ci>``), or by index, which is trusted only with
   ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (CUDA's index is then the rank in PCI bus order;
   ``FASTEST_FIRST`` leaves the order of the other GPUs unspecified);
4. NVML sees a single GPU, not in MIG mode: every CUDA device is that one.

Otherwise there is no match and the entry says why: another GPU's samples are never credited
to the traced one. A MIG instance is matched to its GPU but flagged: NVML's whole-GPU
utilization and GPM counters do not describe one instance.

The result is plain JSON (kept in :attr:`Samples.cuda_devices` and in recordings)::

    {"0": {"gpu": 2, "uuid": "GPU-5e0c…", "how": "UUID GPU-5e0c… (CUDA and NVML agree)"},
     "1": {"gpu": None, "uuid": "", "why": "…"}}
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CudaDevice:
    """What CUDA says about one of its devices (``index`` is CUDA's own ordinal)."""

    index: int
    uuid: str = ""
    pci_bus_id: str = ""
    name: str = ""


def cuda_devices_of(torch: Any) -> list[CudaDevice]:
    """Every CUDA device of this process as torch reports it (UUID, PCI bus id, name)."""
    out: list[CudaDevice] = []
    for i in range(int(torch.cuda.device_count())):
        props = torch.cuda.get_device_properties(i)
        # torch prints CUDA's 16 UUID bytes as 8-4-4-4-12 hex, without NVML's "GPU-" prefix.
        uuid = getattr(props, "uuid", None)
        pci = ""
        bus = getattr(props, "pci_bus_id", None)
        if isinstance(bus, int):
            domain = getattr(props, "pci_domain_id", 0) or 0
            device = getattr(props, "pci_device_id", 0) or 0
            pci = f"{domain:08X}:{bus:02X}:{device:02X}.0"
        out.append(CudaDevice(i, str(uuid) if uuid is not None else "", pci, str(props.name or "")))
    return out


def parse_visible_devices(value: str | None) -> list[str] | None:
    """``CUDA_VISIBLE_DEVICES`` as CUDA reads it: its entries up to the first invalid one.

    ``None`` when unset (every GPU visible). An index entry is CUDA's leading-digits
    reading of it ("1gpu" is 1); a UUID or MIG entry is kept as written.
    """
    if value is None:
        return None
    out: list[str] = []
    for raw in value.split(","):
        entry = raw.strip()
        if entry.startswith(("GPU-", "MIG-")):
            out.append(entry)
            continue
        digits = re.match(r"\d+", entry)
        if digits is None:
            break  # CUDA stops at the first entry it cannot read
        out.append(str(int(digits.group())))
    return out


def _body(uuid: str) -> str:
    """A UUID without NVML's "GPU-"/"MIG-" prefix, lower case: how CUDA and NVML compare."""
    u = uuid.strip().lower()
    for prefix in ("gpu-", "mig-"):
        if u.startswith(prefix):
            return u[len(prefix) :]
    return u


def _pci_key(bus_id: str) -> tuple[int, int, int] | None:
    """(domain, bus, device) of "00000000:17:00.0" (or "0000:17:00.0"), None if unreadable."""
    m = re.fullmatch(
        r"\s*([0-9a-fA-F]+):([0-9a-fA-F]+):([0-9a-fA-F]+)(?:\.[0-9a-fA-F]+)?\s*", bus_id
    )
    if m is None:
        return None
    return int(m.group(1), 16), int(m.group(2), 16), int(m.group(3), 16)


def _match(gpu: int, how: str, uuid: str) -> dict[str, Any]:
    return {"gpu": gpu, "uuid": uuid, "how": how}


def _mig(gpu: int, instance: str, how: str, uuid: str) -> dict[str, Any]:
    return {
        "gpu": gpu,
        "uuid": uuid,
        "mig": True,
        "how": how,
        "why": f"a MIG instance ({instance}) of NVML GPU {gpu}: NVML's utilization and GPM "
        "counters are whole-GPU readings, not this instance's",
    }


def _by_uuid(
    target: str, gpus: Mapping[int, Mapping[str, Any]], prefix_ok: bool
) -> tuple[int, str, bool] | str | None:
    """(NVML index, NVML UUID, is a MIG instance) for a UUID; a reason string if ambiguous."""
    want = _body(target)
    if not want:
        return None
    hits: list[tuple[int, str, bool]] = []
    for k, info in gpus.items():
        candidates = [(str(info.get("uuid") or ""), False)]
        candidates += [(str(u), True) for u in info.get("mig_uuids") or ()]
        for u, is_mig in candidates:
            have = _body(u)
            if have and (have == want or (prefix_ok and have.startswith(want))):
                hits.append((k, u, is_mig))
    if len(hits) > 1:
        return f"{target} matches {len(hits)} GPUs"
    return hits[0] if hits else None


def _knows_uuids(info: Mapping[str, Any]) -> bool:
    """Whether NVML gave this GPU's UUID (and, in MIG mode, its instances')."""
    return bool(info.get("uuid")) and (not info.get("mig") or bool(info.get("mig_uuids")))


def _pci_order(gpus: Mapping[int, Mapping[str, Any]]) -> list[int] | None:
    """NVML indices in PCI bus order (CUDA's order under PCI_BUS_ID), None if unknown."""
    keyed = [(_pci_key(str(info.get("pci_bus_id") or "")), k) for k, info in gpus.items()]
    if not keyed or any(key is None for key, _ in keyed):
        return None
    return [k for _, k in sorted(keyed)]


def _by_visible_entry(
    entry: str, gpus: Mapping[int, Mapping[str, Any]], order: str | None, uuid: str
) -> dict[str, Any] | str:
    """The match a CUDA_VISIBLE_DEVICES entry gives, or why it gives none."""
    named = f"CUDA_VISIBLE_DEVICES entry {entry}"
    if entry.startswith("MIG-GPU-"):
        # The pre-R470 form names the parent GPU: MIG-GPU-<uuid>/<gpu instance>/<compute>.
        parent = entry[len("MIG-") :].split("/", 1)[0]
        hit = _by_uuid(parent, {k: {"uuid": v.get("uuid")} for k, v in gpus.items()}, True)
        if isinstance(hit, tuple):
            return _mig(hit[0], entry, f"{named} (a MIG instance of {hit[1]})", uuid)
        return hit or f"{named} names no GPU NVML lists"
    if entry.startswith(("GPU-", "MIG-")):
        hit = _by_uuid(entry, gpus, True)
        if isinstance(hit, tuple):
            k, nvml_uuid, is_mig = hit
            if is_mig:
                return _mig(k, nvml_uuid, f"{named} (MIG instance {nvml_uuid})", uuid)
            return _match(k, f"{named} (UUID {nvml_uuid})", uuid)
        return hit or f"{named} names no GPU NVML lists"
    n = int(entry)
    if (order or "").strip().upper() != "PCI_BUS_ID":
        return (
            f"{named} is an index in CUDA's own order (CUDA_DEVICE_ORDER="
            f"{order or 'FASTEST_FIRST'}), which NVML does not share; set "
            "CUDA_DEVICE_ORDER=PCI_BUS_ID or name GPUs by UUID"
        )
    ranked = _pci_order(gpus)
    if ranked is None:
        return f"{named}: NVML gave no PCI bus id to put its GPUs in CUDA's PCI_BUS_ID order"
    if n >= len(ranked):
        return f"{named}: NVML lists only {len(ranked)} GPUs"
    k = ranked[n]
    return _match(k, f"{named} with CUDA_DEVICE_ORDER=PCI_BUS_ID (PCI bus rank {n})", uuid)


def map_cuda_devices(
    cuda: Sequence[CudaDevice],
    gpus: Mapping[int, Mapping[str, Any]],
    visible: str | None = None,
    order: str | None = None,
) -> dict[str, dict[str, Any]]:
    """For each CUDA device, the NVML GPU it is (see the module docstring for the rules).

    ``gpus`` is :attr:`Samples.gpus` (NVML index -> name, uuid, pci_bus_id, mig, mig_uuids);
    ``visible`` and ``order`` are ``CUDA_VISIBLE_DEVICES`` and ``CUDA_DEVICE_ORDER`` as the
    process had them.
    """
    entries = parse_visible_devices(visible)
    whole = {k: v for k, v in gpus.items() if not v.get("error")}
    out: dict[str, dict[str, Any]] = {}
    for dev in cuda:
        out[str(dev.index)] = _map_one(dev, whole, entries, order)
    return out


def _map_one(
    dev: CudaDevice,
    gpus: Mapping[int, Mapping[str, Any]],
    entries: list[str] | None,
    order: str | None,
) -> dict[str, Any]:
    why: list[str] = []
    if dev.uuid:
        hit = _by_uuid(dev.uuid, gpus, False)
        if isinstance(hit, tuple):
            k, nvml_uuid, is_mig = hit
            if is_mig:
                return _mig(k, nvml_uuid, f"UUID {nvml_uuid} (CUDA and NVML agree)", dev.uuid)
            return _match(k, f"UUID {nvml_uuid} (CUDA and NVML agree)", dev.uuid)
        why.append(hit or f"its UUID {dev.uuid} is none of the GPUs NVML lists")
        if all(_knows_uuids(info) for info in gpus.values()):
            # NVML gave every UUID and none is this one: weaker evidence cannot overrule it.
            return {"gpu": None, "uuid": dev.uuid, "why": "; ".join(why)}
    if dev.pci_bus_id:
        key = _pci_key(dev.pci_bus_id)
        hits = [
            k
            for k, info in gpus.items()
            if key and _pci_key(str(info.get("pci_bus_id") or "")) == key
        ]
        if len(hits) == 1:
            return _match(hits[0], f"PCI bus id {dev.pci_bus_id}", dev.uuid)
        why.append(f"its PCI bus id {dev.pci_bus_id} is none of NVML's")
    if entries is not None:
        if dev.index < len(entries):
            got = _by_visible_entry(entries[dev.index], gpus, order, dev.uuid)
            if isinstance(got, dict):
                return got
            why.append(got)
        else:
            why.append(f"CUDA_VISIBLE_DEVICES lists no entry {dev.index}")
    elif (order or "").strip().upper() == "PCI_BUS_ID":
        ranked = _pci_order(gpus)
        if ranked is not None and dev.index < len(ranked):
            how = f"CUDA_DEVICE_ORDER=PCI_BUS_ID, every GPU visible (PCI bus rank {dev.index})"
            return _match(ranked[dev.index], how, dev.uuid)
    if len(gpus) == 1:
        ((k, info),) = gpus.items()
        if not info.get("mig"):
            return _match(k, "NVML sees this one GPU only", dev.uuid)
    if not why:
        why.append(
            f"NVML lists {len(gpus)} GPUs and nothing says which one CUDA device {dev.index} "
            "is (no UUID from CUDA, no CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER is not "
            "PCI_BUS_ID)"
        )
    return {"gpu": None, "uuid": dev.uuid, "why": "; ".join(why)}
