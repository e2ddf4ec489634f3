"""The GPU's own interval: ``Sampler(gpu_interval=...)``, ``--gpu-interval``, ``SystemProfiler(gpu_interval_seconds=...)``.

NVML's values do not change at 1 kHz: utilisation covers the driver's last 1/6-1 s, power on recent GPUs is a
1 s average unless the instant field is read, and the fastest counters (the energy counter, the instant power
field, the clocks) step about every 10-20 ms (``benchmarks/gpu_check.py`` measures each metric's refresh period
on the machine it runs on). Reading them every millisecond re-reads cached values at a cost. So the gpu source
has an interval of its own, by default :data:`DEFAULT_GPU_INTERVAL_S` (10 ms: about the energy counter's step,
the fastest metric that really changes) or the sampler's interval where that is longer
(:func:`sysprof.sampling.default_intervals.default_interval`). It is the per-source interval ``intervals["gpu"]``
(rows still come at every ``interval``; the gpu's slice repeats between reads), so ``gpu_interval`` is an alias of
it, and the NVML reader thread itself reads at that interval.
"""
from __future__ import annotations

import math
from typing import Dict, Mapping, Optional

DEFAULT_GPU_INTERVAL_S = 0.01


def with_gpu_interval(intervals: Optional[Mapping[str, float]], gpu_interval: Optional[float]
                      ) -> Optional[Dict[str, float]]:
    """``intervals`` with ``gpu_interval`` as its ``"gpu"`` when given (the user's either way). ``intervals`` itself is
    checked later (``sampler._periods``); this only refuses a ``gpu_interval`` that is not a number or that
    contradicts ``intervals["gpu"]``."""
    if gpu_interval is None:
        return intervals  # type: ignore[return-value]
    if isinstance(gpu_interval, bool) or not isinstance(gpu_interval, (int, float)) or not math.isfinite(gpu_interval):
        raise ValueError(f"gpu_interval must be a number of seconds, got {gpu_interval!r}")
    if isinstance(intervals, Mapping) and "gpu" in intervals and intervals["gpu"] != gpu_interval:
        raise ValueError(f"gpu_interval={gpu_interval!r} and intervals['gpu']={intervals['gpu']!r} disagree; "
                         "give one of them")
    return {**(intervals or {}), "gpu": float(gpu_interval)}
