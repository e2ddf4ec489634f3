"""What a scrape sees of the millisecond rows between two scrapes: a sliding window's extremes and histograms.

Why these two (a Prometheus server scrapes every 15-60 s; sysprof samples every millisecond):

* ``<gauge>_max`` / ``<gauge>_min``: the largest and smallest value of every gauge over a fixed sliding window
  (default 15 s, ``window=``), kept in sub-windows of ``window / slots`` (1 s by default): the ``slots`` whole
  sub-windows before the current one, and the current one so far. So at every scrape the extremes cover at least
  the last ``window`` seconds (at most one sub-window more): a 20 ms burst stays in ``_max`` for the whole window,
  and any scrape interval up to the window sees it, whenever in a sub-window the burst and the scrapes fall. The window is fixed, not "since the previous scrape": with plain Prometheus several servers
  (an HA pair, a second team's) scrape the same target and a scrape cannot tell whose it is, so a window that a
  scrape resets would hand each burst to only one of them. A sliding window makes a scrape read-only: every
  scraper sees the same answer. Set it to the scrape interval (or above; a longer window only holds a burst
  longer). Micrometer's ``_max`` gauges work so (a maximum over a sliding, decaying window, 2 minutes by
  default), as do client_golang's summary quantiles (over ``MaxAge``).
* ``<ratio>_samples`` histograms (``_bucket{le=...}``, ``_sum``, ``_count``) of every ratio channel's samples,
  cumulative since start: ``histogram_quantile(0.99, rate(sysprof_cpu_busy_ratio_samples_bucket[5m]))`` is the
  99th percentile of the millisecond samples over any range, summed over hosts if wanted. A histogram, not a
  summary's quantiles, because the Prometheus documentation recommends histograms for anything aggregated or
  queried over a range, and because its counters need no window at all (independent of who scrapes and when).
  Ratios have a fixed scale, so fixed buckets fit them: 0-1 (:data:`RATIO_BUCKETS`), and for a CPU time in
  cores (a process's, a process tree's, a cgroup's: up to the number of CPUs) those buckets and then
  :data:`CORE_BUCKETS` up to the CPUs (:func:`buckets`); other units have none.
  Per-CPU ratios (``{cpu="N"}``) get none: 12 series per CPU would be most of a large host's scrape, and
  their ``_max``/``_min`` show a core's burst.

Unknown values (NaN) count in neither.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Optional, Sequence, Tuple

import numpy as np

__all__ = ["DEFAULT_WINDOW_S", "DEFAULT_SLOTS", "RATIO_BUCKETS", "CORE_BUCKETS", "buckets", "Window"]

DEFAULT_WINDOW_S = 15.0
DEFAULT_SLOTS = 15
#: upper bounds (``le``) of a 0-1 ratio histogram's buckets, +Inf after them
RATIO_BUCKETS: Tuple[float, ...] = (0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1.0)
#: after RATIO_BUCKETS, the buckets of a CPU time in cores, up to the first at or above the number of CPUs
CORE_BUCKETS: Tuple[float, ...] = (1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 48.0, 64.0, 96.0, 128.0,
                                   192.0, 256.0, 384.0, 512.0, 768.0, 1024.0, 1536.0, 2048.0, 3072.0, 4096.0)


def buckets(top: float = 1.0) -> Tuple[float, ...]:
    """The upper bounds of a histogram of values in [0, ``top``]: RATIO_BUCKETS, then for a top above 1 (cores)
    CORE_BUCKETS up to the first at or above ``top``."""
    out = RATIO_BUCKETS
    for b in CORE_BUCKETS:
        if out[-1] >= top:
            break
        out += (b,)
    return out


class Window:
    """Folds rows (``fold(timestamps_ns, values)``, any thread) into per-column extremes over a sliding window and
    histograms of the columns ``hist_columns``; :meth:`extremes` and :meth:`histograms` read them (a copy).

    Args:
        width: columns of a row.
        window: seconds the extremes span (> 0).
        slots: sub-windows (>= 1); the window slides in steps of ``window / slots``.
        hist_columns: indices of the columns that get a histogram (values already scaled to ratios).
        hist_tops: per histogram column, the top of its range (1 for a ratio, the CPUs for cores; default 1).
        clock: wall-clock ns now, as row timestamps (tests pass a fake).
    """

    def __init__(self, width: int, window: float = DEFAULT_WINDOW_S, slots: int = DEFAULT_SLOTS,
                 hist_columns: Sequence[int] = (), clock: Callable[[], int] = time.time_ns,
                 hist_tops: Sequence[float] = ()) -> None:
        self.window = float(window)
        self.slots = int(slots)
        self._step_ns = max(1, int(round(self.window * 1e9 / self.slots)))
        self._clock = clock
        self._lock = threading.RLock()  # (a stop from a signal handler may re-enter a fold)
        held = self.slots + 1  # the whole sub-windows of the window, and the current one
        self._ids = np.full(held, -1, dtype=np.int64)  # the sub-window each slot holds (-1: none)
        self._max = np.full((held, width), np.nan)
        self._min = np.full((held, width), np.nan)
        self.hist_columns = np.asarray(hist_columns, dtype=np.intp)
        tops = list(hist_tops) or [1.0] * len(self.hist_columns)
        if len(tops) != len(self.hist_columns):
            raise ValueError("one top per histogram column")
        #: per histogram column, its buckets' upper bounds (``le``, +Inf after them)
        self.buckets = [buckets(t) for t in tops]
        n = max((len(b) for b in self.buckets), default=0)
        self._bounds = np.array([b + (np.inf,) * (n - len(b)) for b in self.buckets]).reshape(len(tops), n)
        self._counts = np.zeros((len(self.hist_columns), n), dtype=np.int64)  # cumulative, le
        self._count = np.zeros(len(self.hist_columns), dtype=np.int64)
        self._sum = np.zeros(len(self.hist_columns))
        self.rows = 0  # rows folded

    def fold(self, timestamps_ns: np.ndarray, values: np.ndarray) -> None:
        """Adds rows (ascending ``timestamps_ns``, ``values`` of shape (n, width)); rows older than the window
        count in the histograms only."""
        n = len(timestamps_ns)
        if not n:
            return
        ids = np.asarray(timestamps_ns, dtype=np.int64) // self._step_ns
        with self._lock:
            self.rows += n
            self._fold_hist(values)
            oldest = self._clock() // self._step_ns - self.slots
            edges = np.flatnonzero(np.diff(ids)) + 1  # rows of one sub-window are contiguous
            for lo, hi in zip(np.r_[0, edges], np.r_[edges, n]):
                sid = int(ids[lo])
                if sid < oldest:
                    continue
                k = sid % len(self._ids)
                block = values[lo:hi]
                if self._ids[k] != sid:
                    self._ids[k] = sid
                    self._max[k] = np.fmax.reduce(block, axis=0)
                    self._min[k] = np.fmin.reduce(block, axis=0)
                else:
                    self._max[k] = np.fmax(self._max[k], np.fmax.reduce(block, axis=0))
                    self._min[k] = np.fmin(self._min[k], np.fmin.reduce(block, axis=0))

    def _fold_hist(self, values: np.ndarray) -> None:
        if not len(self.hist_columns):
            return
        v = values[:, self.hist_columns]
        known = ~np.isnan(v)
        self._count += known.sum(axis=0)
        self._sum += np.where(known, v, 0.0).sum(axis=0)
        self._counts += (v[:, :, None] <= self._bounds[None, :, :]).sum(axis=0)

    def extremes(self, now_ns: Optional[int] = None) -> Tuple[np.ndarray, np.ndarray]:
        """(max, min) per column over the current sub-window of ``now_ns`` (default: the clock) and the
        ``slots`` before it: at least the last ``window`` seconds; NaN for a column with no known value there."""
        now = self._clock() if now_ns is None else now_ns
        with self._lock:
            live = self._ids >= now // self._step_ns - self.slots
            return np.fmax.reduce(self._max[live], axis=0, initial=np.nan), \
                np.fmin.reduce(self._min[live], axis=0, initial=np.nan)

    def histograms(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(cumulative bucket counts (columns x buckets, ``le`` of :attr:`buckets`, padded past a column's own
        buckets), count, sum)."""
        with self._lock:
            return self._counts.copy(), self._count.copy(), self._sum.copy()
