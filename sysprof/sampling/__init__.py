"""Sampling: the registry of sources and channels, the one public Sampler over its two backends
(the native extension and the portable psutil/pynvml readers), and the Batch rows they yield."""
from .sampler import Batch, Row, Sampler, native_available

__all__ = ["Batch", "Row", "Sampler", "native_available"]
