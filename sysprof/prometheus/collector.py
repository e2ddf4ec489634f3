"""The prometheus_client Collector: at each scrape it reads the sampler's newest row and the window (it holds no
metric objects updated per sample), and lays them out as the families of :mod:`sysprof.prometheus.names`.

Per family (a gauge ``G``, a counter ``C``, a ratio gauge ``R``):

* ``G`` / ``C_total``: the newest row's value (``Sampler.latest()``, else the newest row folded);
* ``G_max``, ``G_min``: over the sliding window (:mod:`sysprof.prometheus.window`; the newest row included);
* ``R_samples_bucket{le=...}``, ``R_samples_sum``, ``R_samples_count``: the histogram of every sample since start
  (not per CPU);
* ``sysprof_sampler_rows_total``, ``sysprof_sampler_dropped_rows_total``, ``sysprof_sampler_missed_deadlines_total``,
  ``sysprof_sampler_cpu_seconds_total`` (the sampler's ``stats``), ``sysprof_sampler_interval_seconds`` and ``sysprof_window_seconds``.

A NaN (unknown) value is left out of its family, as traces leave it out of their events.
"""
from __future__ import annotations

import logging
import math
from typing import Any, Iterator, List, Optional

import numpy as np

from .names import Family
from .window import Window

__all__ = ["SysprofCollector"]

log = logging.getLogger(__name__)


class SysprofCollector:
    """A collector for ``CollectorRegistry.register``: ``source`` is the endpoint (its ``newest_row()``,
    ``refresh()``, ``sampler_stats()``), ``families`` its families, ``window`` its :class:`Window`."""

    def __init__(self, source: Any, families: List[Family], window: Window, interval: Optional[float]) -> None:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
        from prometheus_client.utils import floatToGoString

        # per histogram column, its buckets' ``le`` as the client's histograms write them
        self._le = [tuple(floatToGoString(b) for b in bounds) + ("+Inf",) for bounds in window.buckets]

        self._gauge, self._counter, self._histogram = GaugeMetricFamily, CounterMetricFamily, HistogramMetricFamily
        self.source, self.families, self.window, self.interval = source, families, window, interval
        self._hist_row = {}  # column -> row of the window's histogram arrays
        for i, col in enumerate(window.hist_columns.tolist()):
            self._hist_row[col] = i
        self._failed = False

    def describe(self) -> list:
        return []  # no describe at registration: collect() would run then

    def collect(self) -> Iterator[Any]:
        try:
            self.source.refresh()
            row = self.source.newest_row()
            hi, lo = self.window.extremes()
            counts, count, total = self.window.histograms()
            out = list(self._sampler_families())
        except Exception:  # noqa: BLE001 - a scrape never raises into the HTTP server (it answers what it has)
            if not self._failed:
                log.exception("sysprof prometheus: scrape failed")
            self._failed = True
            return
        if row is not None:
            hi, lo = np.fmax(hi, row), np.fmin(lo, row)
        for fam in self.families:
            out.extend(self._family(fam, row, hi, lo, counts, count, total))
        yield from out

    def _family(self, fam: Family, row, hi, lo, counts, count, total) -> Iterator[Any]:
        m, labels = fam.metric, list(fam.labels)
        if m.type == "counter":
            c = self._counter(m.name, m.help, labels=labels)
            self._fill(c, fam, row)
            yield c
            return
        g, gmax, gmin = (self._gauge(n, h, labels=labels) for n, h in (
            (m.name, m.help), (m.name + "_max", f"largest over the window: {m.help}"),
            (m.name + "_min", f"smallest over the window: {m.help}")))
        self._fill(g, fam, row)
        self._fill(gmax, fam, hi)
        self._fill(gmin, fam, lo)
        yield from (g, gmax, gmin)
        if fam.columns[0] in self._hist_row:
            h = self._histogram(m.name + "_samples", f"every sample since start: {m.help}", labels=labels)
            for col, values in zip(fam.columns, fam.values):
                i = self._hist_row[col]
                le = self._le[i]
                buckets = [(b, float(n)) for b, n in zip(le, counts[i, :len(le) - 1].tolist() + [int(count[i])])]
                h.add_metric(list(values), buckets, float(total[i]))
            yield h

    @staticmethod
    def _fill(metric: Any, fam: Family, values: Optional[np.ndarray]) -> None:
        if values is None:
            return
        for col, labels in zip(fam.columns, fam.values):
            v = float(values[col])
            if not math.isnan(v):
                metric.add_metric(list(labels), v)

    def _sampler_families(self) -> Iterator[Any]:
        stats = self.source.sampler_stats()
        for key, name, help_text in (("taken", "sysprof_sampler_rows", "rows the sampling thread took"),
                                     ("dropped", "sysprof_sampler_dropped_rows", "rows dropped by a full ring"),
                                     ("missed_deadlines", "sysprof_sampler_missed_deadlines",
                                      "sampling deadlines missed"),
                                     ("cpu_seconds_total", "sysprof_sampler_cpu_seconds",
                                      "CPU of sysprof's sampling threads (the CPU budget's measure)")):
            if key in stats:
                yield self._counter(name, help_text, value=float(stats[key]))
        if self.interval is not None:
            yield self._gauge("sysprof_sampler_interval_seconds", "seconds between two rows", value=self.interval)
        yield self._gauge("sysprof_window_seconds", "the window of the _max and _min gauges",
                          value=self.window.window)
