"""Which GPUs the gpu source reads, and in which order: ``Sampler(gpus=...)``, ``sysprof record --gpus``, else
``CUDA_VISIBLE_DEVICES``.

``gpus`` is a list of entries, each one of:

* an NVML index (``0``, ``"2"``): the ``<index>`` of ``gpu/<index>/...`` (NVML numbers GPUs in PCI bus order);
* a GPU UUID or a unique prefix of one (``"GPU-8f2a"``), as ``nvidia-smi -L`` prints it;
* a MIG instance's UUID or prefix (``"MIG-..."``): selects its parent GPU (NVML reads a MIG-enabled GPU as a
  whole; its instances are listed in ``Sampler.devices``' ``mig_instances``);
* a PCI bus id (``"0000:17:00.0"``; the domain may have 4 or 8 hex digits).

Devices come in the list's order, each once; an entry that matches no GPU is named in ``errors["gpu"]``.
``"all"`` (or ``["all"]``) reads every GPU in NVML order, whatever ``CUDA_VISIBLE_DEVICES`` says.

``gpus=None`` (the default): when ``CUDA_VISIBLE_DEVICES`` is set, the GPUs it makes visible, in CUDA's order
(its entries as above; CUDA stops at the first entry it cannot parse, and so does this; each device then has a
``cuda_index``, its ``cuda:N``); otherwise every GPU. Integer entries in ``CUDA_VISIBLE_DEVICES`` are matched as
NVML indices, which is CUDA's numbering with ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (CUDA's default order puts the
fastest GPU first; on a node of identical GPUs the two agree).

:func:`selection` resolves the rule to ``(entries, from_cuda)``; the native source gets it as Config options
``gpu:select:<kind>:<value>`` (:func:`native_options`, read by csrc/gpu/nvml_select.cpp) and the pynvml path
applies :func:`match` itself.
"""
from __future__ import annotations

import os
import re
from typing import Iterable, List, Mapping, Optional, Sequence, Tuple

__all__ = ["check_gpus", "device", "selection", "native_options", "match"]

_PCI = re.compile(r"^([0-9a-fA-F]{1,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-9a-fA-F])$")
Entry = Tuple[str, str]  # (kind, value): index, uuid, mig, pci


def _entry(text: str) -> Optional[Entry]:
    """One entry as (kind, value), or None when it is none of the four forms."""
    t = text.strip()
    if t.isdigit():
        return ("index", str(int(t)))
    if t[:4].upper() == "GPU-" and len(t) > 4:
        return ("uuid", t.upper())
    if t[:4].upper() == "MIG-" and len(t) > 4:
        return ("mig", t.upper())
    m = _PCI.match(t)
    if m:
        return ("pci", f"{int(m.group(1), 16):08X}:{m.group(2)}:{m.group(3)}.{m.group(4)}".upper())
    return None


def check_gpus(gpus, what: str = "gpus") -> Optional[Tuple[Entry, ...]]:
    """``gpus`` as entries (None: not given; ``()`` never); ValueError naming ``what`` for anything else
    than None, "all", or a list of indices, UUIDs, MIG UUIDs and PCI bus ids."""
    if gpus is None:
        return None
    if isinstance(gpus, str):
        gpus = [gpus] if gpus == "all" else gpus.split(",")
    if isinstance(gpus, (bytes, int)) or not isinstance(gpus, Iterable):
        raise ValueError(f"{what} must be a list of GPU indices, UUIDs or PCI bus ids (or 'all'), got {gpus!r}")
    items = list(gpus)
    if [str(g).strip() for g in items] == ["all"]:
        return ("all",)  # type: ignore[return-value]
    out = []
    for g in items:
        e = _entry(str(g)) if isinstance(g, (str, int)) and not isinstance(g, bool) else None
        if e is None:
            raise ValueError(f"{what}: {g!r} is not a GPU index, GPU-/MIG- UUID or PCI bus id (e.g. 0, "
                             "'GPU-8f2a...', '0000:17:00.0')")
        out.append(e)
    if not out:
        raise ValueError(f"{what} is empty (leave it out, or 'all', to read every GPU)")
    return tuple(out)


def selection(gpus=None, environ: Optional[Mapping[str, str]] = None) -> Tuple[Optional[List[Entry]], bool]:
    """(entries in order, from CUDA_VISIBLE_DEVICES); entries None: every GPU, NVML order."""
    given = check_gpus(gpus)
    if given == ("all",):
        return None, False
    if given is not None:
        return list(given), False
    env = os.environ if environ is None else environ
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return None, False
    out: List[Entry] = []
    for part in cvd.split(","):
        e = _entry(part)
        if e is None:  # CUDA ignores this entry and every one after it
            break
        out.append(e)
    return out, True


def native_options(gpus=None, environ: Optional[Mapping[str, str]] = None) -> List[str]:
    """The selection as the native source's Config options (none: every GPU)."""
    entries, cuda = selection(gpus, environ)
    if entries is None:
        return []
    opts = [f"gpu:select:{k}:{v}" for k, v in entries] or ["gpu:select:none"]
    return opts + (["gpu:select:cuda"] if cuda else [])


def match(entries: Sequence[Entry], devices: Sequence[Mapping[str, object]]) -> Tuple[List[int], List[str]]:
    """(positions in ``devices`` selected, in entry order, each once; the entries matching none, as text).
    ``devices``: dicts with index, uuid, pci_bus_id and mig_instances (a list) where an entry needs them."""
    out: List[int] = []
    unmatched: List[str] = []
    for kind, value in entries:
        found = None
        for i, d in enumerate(devices):
            if kind == "index" and str(d.get("index")) == value:
                found = i
            elif kind == "uuid" and str(d.get("uuid", "")).upper().startswith(value) and d.get("uuid"):
                found = i
            elif kind == "pci" and str(d.get("pci_bus_id", "")).upper() == value:
                found = i
            elif kind == "mig" and any(str(u).upper().startswith(value) for u in d.get("mig_instances") or ()):
                found = i
            if found is not None:
                break
        if found is None:
            unmatched.append(f"{kind} {value}")
        elif found not in out:
            out.append(found)
    return out, unmatched


def device(d: dict) -> dict:
    """A GPU's description as ``Sampler.devices`` gives it: ``index`` and ``cuda_index`` as ints,
    ``mig_instances`` as a list (the native source gives strings, the instances comma-separated)."""
    for k in ("index", "cuda_index"):
        if k in d:
            d[k] = int(d[k])
    d.pop("driver_samples", None)  # the native reader's buffer key (gpu_samples.drain reads it), not a fact
    if isinstance(d.get("mig_instances"), str):
        d["mig_instances"] = [u for u in d["mig_instances"].split(",") if u]
    return d
