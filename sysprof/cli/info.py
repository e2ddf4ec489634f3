"""``sysprof info``: what sysprof can sample on this machine and why not: the backend, each registry source's
availability (from a Sampler with every source on: its channels and ``errors``), the files the sources read,
NVML, the cgroup version, the kernel and CPUs."""
from __future__ import annotations

import itertools
import json
import os
import platform
import re
import sys

from ..report import jsonable
from ..sampling.registry import SOURCES
from .common import CLIError, _version


def source_files():
    """The files the registry's sources read (``spec.file``), as paths of this process: ``{a,b}`` expanded,
    ``<pid>`` as ``self``, ``/proc/<pid>/task/<tid>/`` as ``/proc/thread-self/``; a name with another
    placeholder (a cgroup's path) or none at all (NVML) is left out."""
    out = []
    for spec in SOURCES.values():
        for name in re.split(r",\s+", spec.file):  # "a, b": two files; "{a,b}": one per choice
            name = name.strip().replace("/proc/<pid>/task/<tid>/", "/proc/thread-self/").replace("<pid>", "self")
            if not name.startswith("/") or "<" in name:
                continue
            for path in _expand_braces(name):
                if path not in out:
                    out.append(path)
    return tuple(out)


def _expand_braces(name: str):
    """``/proc/pressure/{cpu,io}`` -> ``/proc/pressure/cpu``, ``/proc/pressure/io``."""
    parts = re.split(r"\{([^{}]*)\}", name)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(c) for c in itertools.product(*choices)]


def _readable(path: str):
    try:
        with open(path, "rb") as f:
            f.read(1)
        return True, None
    except OSError as e:
        return False, e.strerror or str(e)


def _cgroup_version(root: str = "/sys/fs/cgroup") -> str:
    if os.path.exists(os.path.join(root, "cgroup.controllers")):
        return "v2 (unified)"
    if os.path.exists(os.path.join(root, "unified", "cgroup.controllers")):
        return "hybrid (v1 controllers + v2 at /sys/fs/cgroup/unified)"
    if os.path.isdir(os.path.join(root, "memory")) or os.path.isdir(os.path.join(root, "cpu")):
        return "v1"
    return "none found"


def _nvml_info():
    from ..sampling.portable.nvml import probe_library

    return probe_library()


def gather_info() -> dict:
    info = {"version": _version(), "python": platform.python_version(), "kernel": platform.release(),
            "machine": platform.machine(), "cpu_count": os.cpu_count()}
    try:
        info["cpu_affinity"] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        info["cpu_affinity"] = None
    try:
        import sysprof
    except ImportError as e:
        raise CLIError(f"cannot import the sysprof package: {e}") from None
    try:
        ok, why = sysprof.native_available()
    except AttributeError:  # pragma: no cover - an older package
        try:
            import sysprof._native  # noqa: F401
            ok, why = True, ""
        except ImportError as e:
            ok, why = False, f"sysprof._native not importable: {e}"
    info["native"] = {"available": bool(ok),
                      "reason": "the C++ extension sysprof._native is loaded and /proc is there" if ok else why}
    everything = {n: True for spec in SOURCES.values() for n in (spec.name, *(o.name for o in spec.options))}
    try:
        s = sysprof.Sampler(interval=0.01, **everything)
        info["backend"] = s.backend
        errors = dict(s.errors)
        chans = list(s.channels)
    except Exception as e:
        info["backend"] = None
        info["sampler_error"] = f"{type(e).__name__}: {e}"
        errors, chans = {}, []
    info["sources"] = {name: _source_state(spec, chans, errors) for name, spec in SOURCES.items()}
    info["nvml"] = _nvml_info()
    if info["sources"].get("gpu", {}).get("available"):  # each GPU metric's refresh period, read at 1 ms for 0.5 s
        from ..sampling.gpu_refresh import measure_refresh
        info["gpu_refresh"] = measure_refresh(0.5)
    info["cgroup"] = _cgroup_version()
    info["proc_files"] = {p: ({"readable": True} if ok else {"readable": False, "reason": why})
                          for p in source_files() for ok, why in [_readable(p)]}
    return info


def _source_state(spec, channels, errors) -> dict:
    """``available`` (the sampler has one of its channels), ``channels`` (how many) and the sampler's ``reason``
    (a problem with part of an available source)."""
    n = sum(1 for c in channels if c.startswith(spec.prefixes))
    if spec.name in errors:
        return {"available": n > 0, "channels": n, "reason": errors[spec.name]}
    if n:
        return {"available": True, "channels": n}
    return {"available": False, "channels": 0, "reason": "no channels"}


def cmd_info(args) -> int:
    info = gather_info()
    if args.json:
        json.dump(jsonable(info), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    w = sys.stdout.write
    nat = info["native"]
    w(f"sysprof {info['version']} (python {info['python']})\n")
    backend = info.get("backend") or "none"
    if backend == "psutil" and nat["available"]:
        why = "native available but not chosen"
    elif backend == "psutil":
        why = f"fallback: {nat['reason']}"
    else:
        why = nat["reason"]
    w(f"backend:  {backend}  ({why})\n")
    if info.get("sampler_error"):
        w(f"sampler:  cannot construct: {info['sampler_error']}\n")
    w(f"kernel:   {info['kernel']} ({info['machine']})\n")
    w(f"cpus:     {info['cpu_count']} online, {info['cpu_affinity']} usable by this process\n")
    w(f"cgroup:   {info['cgroup']}\n")
    nv = info["nvml"]
    w(f"nvml:     {'found: ' + nv['library'] if nv['found'] else 'not found: ' + nv['reason']}\n")
    _write_refresh(w, info.get("gpu_refresh"))
    w("sources:\n")
    width = max([8] + [len(src) for src in info["sources"]])
    for src, e in info["sources"].items():
        if e["available"]:
            w(f"  {src:<{width}} yes  ({e['channels']} channels)" + (f"; note: {e['reason']}" if e.get("reason") else "") + "\n")
        else:
            w(f"  {src:<{width}} no   ({e.get('reason')})\n")
    w("proc files:\n")
    width = max([22] + [len(p) for p in info["proc_files"]])
    for p, e in info["proc_files"].items():
        w(f"  {p:<{width}} {'readable' if e['readable'] else 'not readable: ' + e['reason']}\n")
    return 0


def _write_refresh(w, refresh) -> None:
    """One line per GPU: each channel's refresh period (sysprof/sampling/gpu_refresh.py)."""
    if not refresh:
        return
    if "error" in refresh:
        w(f"gpu refresh: not measured ({refresh['error']})\n")
        return
    from ..sampling.gpu_refresh import describe_period

    w(f"gpu refresh (the median time between changes, read every 1 ms for {refresh['window_s']:g} s):\n")
    per_gpu = {}
    for ch, p in refresh["channels"].items():
        gpu, _, name = ch.rpartition("/")
        per_gpu.setdefault(gpu, []).append(f"{name} {describe_period(p)}")
    for gpu, items in per_gpu.items():
        w(f"  {gpu}: " + ", ".join(items) + "\n")
