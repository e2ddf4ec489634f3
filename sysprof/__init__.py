"""sysprof: high-frequency system metrics for ML training.

A native thread reads /proc (and NVML) into a lock-free ring buffer without touching the GIL;
a thin Python layer drains it and speaks Composer's profiler API.
"""
from .sampler import Batch, Sampler, native_available

__version__ = "0.1.0"
__all__ = ["Batch", "Sampler", "native_available", "__version__"]
