"""The NVML library for the pynvml path, as csrc/gpu/nvml_library.cpp has it for the native source:
which file is loaded (``SYSPROF_NVML_LIBRARY``, else ``libnvidia-ml.so.1``), the return codes that
are permanent answers or mean a lost device, and what an ``nvmlInit`` failure most likely means.

:func:`library_path` and :func:`probe_library` are the one statement of the path rule in Python; the
CLI's ``sysprof info`` reports :func:`probe_library`.
"""
from __future__ import annotations

import ctypes
import os
from typing import Dict, Optional

ENV = "SYSPROF_NVML_LIBRARY"
DEFAULT_LIBRARY = "libnvidia-ml.so.1"

SUCCESS, INVALID_ARGUMENT, NOT_SUPPORTED, NO_PERMISSION = 0, 2, 3, 4
LIBRARY_NOT_FOUND, FUNCTION_NOT_FOUND, GPU_IS_LOST, RESET_REQUIRED = 12, 13, 15, 16
ARGUMENT_VERSION_MISMATCH = 25
#: answers that will not change while the driver is loaded: remembered per (device, metric)
PERMANENT = frozenset({NOT_SUPPORTED, NO_PERMISSION, FUNCTION_NOT_FOUND, ARGUMENT_VERSION_MISMATCH})
#: the device is gone until a reset
LOST = frozenset({GPU_IS_LOST, RESET_REQUIRED})
INIT_HINTS = {9: " (the NVIDIA kernel driver is not loaded)",
              18: " (libnvidia-ml and the kernel driver are different versions; e.g. the driver was "
                  "upgraded without a reboot)",
              4: " (no permission to open the /dev/nvidia* device files)"}


def library_path() -> str:
    """The NVML library sysprof loads: ``$SYSPROF_NVML_LIBRARY`` when set and not empty, else
    ``libnvidia-ml.so.1`` (found through the dynamic loader's search path)."""
    return os.environ.get(ENV) or DEFAULT_LIBRARY


def library_from_env() -> bool:
    """Whether :func:`library_path` comes from ``SYSPROF_NVML_LIBRARY``."""
    return bool(os.environ.get(ENV))


def probe_library() -> Dict[str, Optional[object]]:
    """Whether :func:`library_path` loads here (``dlopen`` only: no NVML call is made), as
    ``{"found", "library", "source", "reason"}``; reason is None when found."""
    path, source = library_path(), (ENV if library_from_env() else "the loader path")
    try:
        ctypes.CDLL(path)
    except OSError as exc:
        hint = "" if library_from_env() else f"; no NVIDIA driver installed? {ENV} names another path"
        return {"found": False, "library": None, "source": source,
                "reason": f"NVML library not loadable ({path}): {exc}{hint}"}
    return {"found": True, "library": path, "source": source, "reason": None}


def import_pynvml():
    try:
        import pynvml  # noqa: PLC0415 - optional dependency
    except ImportError as exc:
        raise RuntimeError("pynvml is not installed (pip install 'sysprof[gpu]')") from exc
    return pynvml


def load_into(pynvml) -> None:
    """Points pynvml at ``$SYSPROF_NVML_LIBRARY`` (pynvml itself only ever loads libnvidia-ml.so.1)."""
    if not library_from_env() or pynvml.nvmlLib is not None:
        return
    path = library_path()
    with pynvml.libLoadLock:
        try:
            pynvml.nvmlLib = ctypes.CDLL(path)
        except OSError as exc:
            raise RuntimeError(f"NVML library not loadable ({path}): {exc}") from None


def init_failure(pynvml, code: int) -> str:
    """The message for an ``nvmlInit`` that returned ``code``."""
    if code == LIBRARY_NOT_FOUND:
        return (f"NVML library not loadable ({DEFAULT_LIBRARY}); no NVIDIA driver installed? "
                f"{ENV} names another path")
    return f"nvmlInit failed: {code_name(pynvml, code)}{INIT_HINTS.get(code, '')}"


def code_name(pynvml, code: int) -> str:
    """pynvml's symbolic name of a return code (``NVML_ERROR_NOT_SUPPORTED``)."""
    for name in dir(pynvml):
        if (name.startswith("NVML_ERROR_") or name == "NVML_SUCCESS") and getattr(pynvml, name) == code:
            return name
    return f"NVML error {code}"
