"""The one mapping from the registry's channels to Prometheus metric families: names, types, labels, divisor.

Rules (:func:`metric_of`, applied to each registry pattern; nothing else names a metric):

* ``sysprof_`` + the pattern's path parts joined by ``_``: ``memory/used_bytes`` -> ``sysprof_memory_used_bytes``.
* A per-device part becomes a label (:data:`LABELS`): ``disk/<dev>/read_bytes`` ->
  ``sysprof_disk_read_bytes_total{device="nvme0n1"}``, ``net/<nic>/...{device="eth0"}`` (node_exporter's label
  for both), ``cpu/<id>/percent{cpu="3"}``, ``gpu/<index>/...{gpu="0", uuid="GPU-..."}``, ``process_tree/<slot>/...
  {slot="2"}``. Where the name without the part would be the summed channel's (``cpu/percent`` and
  ``cpu/<id>/percent``), the part leaves a word instead (:data:`INFIX`): ``sysprof_cpu_core_busy_ratio{cpu="3"}``.
* Kinds: ``counter``, ``counter32`` and ``ticks`` are Prometheus counters (``_total`` added where the channel's name
  lacks it: ``sysprof_disk_read_bytes_total``, ``sysprof_gpu_energy_joules_total``); ``gauge`` and ``rate`` are
  gauges (a rate is sysprof's own per-interval rate, kept for its window maximum; ``rate()`` of the counter is
  the Prometheus way to the mean rate). A gauge never ends in ``_total`` (``load/procs_total``, every scheduling
  entity, is ``sysprof_load_procs``), nor in ``_count``, ``_sum`` or ``_bucket`` (none does).
* Units are Prometheus base units, by the registry's unit of the channel (:data:`BASE_UNITS`, the one place a
  value is converted for Prometheus). Percents become ratios (``_percent`` -> ``_ratio``, value / 100; a bare
  ``percent`` is a busy share: ``_busy_ratio``), as the Prometheus naming guide's base-unit table and
  node_exporter do (no exporter of the Prometheus project exports percents; ``rate(node_cpu_seconds_total)`` is a
  0-1 ratio too, so sysprof's values compare and divide with theirs). The division is the one conversion on that
  path, not half a round trip: the sampler's channels are percents by design (their names say so, every trace and
  Composer's names carry them as they are), so a percent is computed once, as a percent, and only the Prometheus
  sink takes it to its base unit. A share of wall time (``s/s``, ``..._seconds_per_second``) is a ratio already
  (``_ratio``, divisor 1); ``_hz`` -> ``_hertz``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from ..sampling.registry import SOURCES, TOTAL_KINDS, ChannelSpec, channel_spec

__all__ = ["PREFIX", "LABELS", "INFIX", "BASE_UNITS", "RATIO_UNITS", "Metric", "metric_of", "all_metrics", "Family", "families"]

PREFIX = "sysprof_"
#: per-device placeholder -> Prometheus label
LABELS: Dict[str, str] = {"dev": "device", "nic": "device", "id": "cpu", "index": "gpu", "slot": "slot"}
#: placeholders whose channels sit beside a summed channel of the same leaf: the word that keeps them apart
INFIX: Dict[str, str] = {"id": "core", "slot": "member"}
COUNTER_KINDS = TOTAL_KINDS  # a total is a Prometheus counter
#: registry unit -> (the leaf's Prometheus spelling, divisor from the sampler's value to Prometheus' base unit)
BASE_UNITS: Dict[str, Tuple[Callable[[str], str], float]] = {
    "%": (lambda leaf: "busy_ratio" if leaf == "percent" else re.sub(r"percent$", "ratio", leaf), 100.0),
    "s/s": (lambda leaf: re.sub(r"(_time)?_seconds_per_second$", r"\1_ratio", leaf), 1.0),
    "Hz": (lambda leaf: re.sub(r"_hz$", "_hertz", leaf), 1.0),
}
#: registry units whose Prometheus base unit is a 0-1 ratio (a :attr:`Metric.ratio` family)
RATIO_UNITS = ("%", "s/s")


@dataclass(frozen=True)
class Metric:
    """A Prometheus family of one registry pattern. ``name`` is the family's (a counter's without ``_total``:
    prometheus_client adds it); ``label`` the per-device label or None; values are divided by ``divisor`` (100 for a percent: :data:`BASE_UNITS`);
    ``unit`` is the registry's."""

    pattern: str
    name: str
    type: str  # "counter" | "gauge"
    label: Optional[str]
    divisor: float
    help: str
    unit: Optional[str] = None

    @property
    def ratio(self) -> bool:
        """A 0-1 ratio in Prometheus (the registry's unit is a percent or a share of wall time)."""
        return self.unit in RATIO_UNITS

    @property
    def exposed(self) -> str:
        """The sample name as scraped: a counter's with ``_total``."""
        return self.name + "_total" if self.type == "counter" else self.name


def _leaf(leaf: str, spec: ChannelSpec) -> Tuple[str, float]:
    """The last name part in Prometheus' base unit and the divisor that takes the sampler's value there."""
    spell, divisor = BASE_UNITS.get(spec.unit, (None, 1.0))
    return (leaf if spell is None else spell(leaf)), divisor


@lru_cache(maxsize=None)
def metric_of(spec: ChannelSpec) -> Metric:
    """The family of a registry channel pattern (the rules above)."""
    parts = spec.pattern.split("/")
    words, label = [], None
    for i, part in enumerate(parts):
        m = re.fullmatch(r"<([a-z]+)>", part)
        if m is None:
            words.append(_leaf(part, spec)[0] if i == len(parts) - 1 else part)
            continue
        label = LABELS[m.group(1)]
        if m.group(1) in INFIX:
            words.append(INFIX[m.group(1)])
    name = PREFIX + "_".join(words)
    counter = spec.kind in COUNTER_KINDS
    if name.endswith("_total"):  # a counter's is added back by prometheus_client; a gauge's would mislead
        name = name[: -len("_total")]
    divisor = _leaf(parts[-1], spec)[1]
    help_text = spec.help + (f" (ratio: percent / {divisor:g})" if spec.unit == "%" else "")
    return Metric(spec.pattern, name, "counter" if counter else "gauge", label, divisor,
                  f"{help_text}; from {spec.field}", spec.unit)


def all_metrics() -> List[Metric]:
    """Every registry pattern's family, in registry order."""
    return [metric_of(c) for src in SOURCES.values() for c in src.channels]


@dataclass
class Family:
    """One family as a sampler's channels fill it: ``columns`` (indices into the row) and, per column, its
    label values (``()`` without a label; a GPU's are ``(index, uuid)``)."""

    metric: Metric
    labels: Tuple[str, ...]
    columns: List[int]
    values: List[Tuple[str, ...]]


def _device_part(pattern: str, channel: str) -> str:
    parts, got = pattern.split("/"), channel.split("/")
    for p, g in zip(parts, got):
        if p.startswith("<"):
            return g
    return ""


def families(channels: Sequence[str], gpus: Iterable[dict] = ()) -> List[Family]:
    """The families of a sampler's ``channels`` (its ``Sampler.channels``), in order of their first channel;
    ``gpus`` is ``Sampler.devices`` (for the ``uuid`` label). Channels the registry does not declare are left out."""
    uuid = {str(d.get("index")): str(d.get("uuid", "")) for d in gpus}
    out: Dict[str, Family] = {}
    for col, ch in enumerate(channels):
        spec = channel_spec(ch)
        if spec is None:
            continue
        m = metric_of(spec)
        fam = out.get(m.name)
        if fam is None:
            labels = () if m.label is None else ("gpu", "uuid") if m.label == "gpu" else (m.label,)
            fam = out[m.name] = Family(m, labels, [], [])
        part = _device_part(spec.pattern, ch)
        fam.columns.append(col)
        fam.values.append(() if m.label is None else (part, uuid.get(part, "")) if m.label == "gpu" else (part,))
    return list(out.values())
