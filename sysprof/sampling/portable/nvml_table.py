"""What the pynvml path asks of NVML per device: the GPU metric table (sysprof/sampling/gpu_metrics.py, the one the
native build generates its rows from), with the lookups the reader needs: the channel layout, the rows by key, the
field and getter rows, each fallback's primary.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

from ..gpu_metrics import GPM_METRICS, METRICS, Metric
from ..registry import SOURCES

#: channels per device, in row order: the registry's (sysprof/sampling/registry.py, ``_gpu()``)
CHANNELS = tuple(c.pattern.rsplit("/", 1)[-1] for c in SOURCES["gpu"].channels)
INDEX = {c: i for i, c in enumerate(CHANNELS)}
#: the GPM-only channels (sysprof/sampling/portable/nvml_gpm.py): laid out only where the device has GPM
GPM_CHANNELS = tuple(c for c in CHANNELS if c in {g.channel for g in GPM_METRICS}
                     and not any(c in m.channels for m in METRICS))

BY_KEY: Dict[str, Metric] = {m.metric: m for m in METRICS}
#: the channels the slow rows write
SLOW_CHANNELS: Tuple[str, ...] = tuple(c for m in METRICS if m.slow for c in m.channels)
FIELDS: Tuple[Metric, ...] = tuple(m for m in METRICS if m.field_id is not None)
GETTERS: Tuple[Metric, ...] = tuple(m for m in METRICS if m.field_id is None)
#: metric -> the metric whose fallback it is (asked only once that one is refused)
PRIMARY: Dict[str, str] = {m.fallback: m.metric for m in METRICS if m.fallback is not None}


def wanted(metric: str, refused) -> bool:
    """Asked now: not refused, and when it is a fallback, the metric it stands in for is refused."""
    if metric in refused:
        return False
    primary = PRIMARY.get(metric)
    return primary is None or primary in refused


def field_value(f) -> Optional[float]:
    """The value of an nvmlFieldValue_t entry as a number, whatever type the driver chose; None if unusable."""
    t, v = f.valueType, f.value
    if t == 0:
        return v.dVal
    if t == 1:
        return None if v.uiVal == 0xFFFFFFFF else v.uiVal
    if t == 2:
        return v.ulVal
    if t == 3:
        return None if v.ullVal == 0xFFFFFFFFFFFFFFFF else v.ullVal
    if t == 4:
        return v.sllVal
    if t == 5:
        return v.siVal
    if t == 6:
        return v.usVal
    return None
