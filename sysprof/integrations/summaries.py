"""Summaries of the samples since the previous log, for the user's own logger (W&B, MLflow, TensorBoard, ...).

One module for the three trainers: Composer's ``Logger`` (``SystemProfiler(log_summaries=True)``), Lightning's
loggers and Hugging Face's ``on_log`` (the ``SysprofCallback`` of :mod:`sysprof.integrations.lightning` and
:mod:`sysprof.integrations.transformers`). At each logging step the caller drains the sampler into the window and
:meth:`SummaryWindow.take` returns ``{"sysprof/<name>": float}`` over the rows sampled since the previous take,
then starts the next window.

The default set (:data:`DEFAULT_SUMMARIES`; a summary whose channel the sampler does not have is left out, one
whose window holds no finite value is NaN):

=====================================  ===========================================================  ===========
name (``sysprof/`` + ...)              what                                                         channel
=====================================  ===========================================================  ===========
``cpu_percent_mean``                   busy share of all CPUs, mean over the window (%)             cpu/percent
``cpu_percent_max``                    its largest sample (%)                                       cpu/percent
``memory_used_bytes_max``              MemTotal - MemAvailable, largest sample (bytes)              memory/used_bytes
``io_stall_share``                     share of wall time some task stalled on I/O (PSI, 0-1)       pressure/io/some_seconds_per_second
``dataloader_wait_share``              share of the window's wall time inside ``dataloader``        (phase spans)
                                       phases (0-1; trainers whose phases include the fetch)
``gpu<i>_utilization_percent_mean``    time a kernel ran, mean (%; NVML's utilisation)              gpu/<i>/utilization_percent
``gpu<i>_sm_active_percent_mean``     SMs busy, mean (%; GPM, Hopper and newer: absent elsewhere)  gpu/<i>/sm_active_percent
``gpu<i>_memory_used_bytes_max``       device memory used, largest sample (bytes)                   gpu/<i>/memory_used_bytes
``gpu<i>_energy_joules``               energy the GPU used during the window (J)                    gpu/<i>/energy_joules
=====================================  ===========================================================  ===========

Configuring: ``summaries=`` takes None (the defaults), False or ``[]`` (none), or a list whose items are
:class:`Summary` objects or ``"channel:stat"`` strings, e.g. ``["cpu/percent:p95", "gpu/*/power_watts:mean",
"phase/backward:share"]``. ``channel`` is a registry channel name or a glob with one ``*`` (one summary per
matching channel); ``phase/<name>`` is the share of wall time inside the trainer's ``<name>`` phases. The name
logged is the channel's with ``/`` as ``_`` (a number joins the part before it: ``gpu/0/x`` -> ``gpu0_x``), then
``_`` and the statistic: ``cpu/percent:p95`` -> ``sysprof/cpu_percent_p95``.

Statistics: ``mean``, ``min``, ``max``, ``last`` (the window's last finite sample), ``delta`` (a cumulative
counter's growth: its last value minus its last value of the previous window, or minus the window's first where
there is none; NaN on a decrease, a reset), ``p50``, ``p95``, ``p99`` (of the samples, through
:func:`sysprof.report.stats.weighted_quantile`; the window keeps at most :data:`QUANTILE_ROWS` of them, the
latest), ``share`` (phases only). Samples are equally spaced, so each row weighs the same.

Cost: a running summary. Each drain folds its rows into per-column count, sum, min, max, first and last with a
few numpy reductions; a step that does not log costs nothing here. :meth:`take` is a few arithmetic operations per
summary (plus a sort per quantile). The trainer callbacks do even that off the training thread: the recorder's
thread folds every 0.5 s and leaves the summaries as of then ready (``add(batch, snapshot_ns=...)``); a log step
takes them (:meth:`take_ready`: a lock and a swap), and its window ends at that drain, at most 0.5 s and 10 % of
the window before the log; the rows after it go into the next window, so none is lost or counted twice. A log
more often (every 5 s or less) folds the rows since the drain itself, and its window ends at the log.
"""
from __future__ import annotations

import fnmatch
import math
import re
import threading
import time
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Union

import numpy as np

from sysprof.pipeline import Sink
from sysprof.trace.events import SPAN

__all__ = ["Summary", "SummaryWindow", "DEFAULT_SUMMARIES", "STATISTICS", "PREFIX", "QUANTILE_ROWS", "READY_LAG_SHARE",
           "parse_summaries", "SummarySink"]

#: every name logged starts with this
PREFIX = "sysprof/"
#: the statistics a summary may ask for
STATISTICS = ("mean", "min", "max", "last", "delta", "p50", "p95", "p99", "share")
_QUANTILES = {"p50": 0.5, "p95": 0.95, "p99": 0.99}
#: quantiles are of the window's latest QUANTILE_ROWS samples at most (the others use every sample)
QUANTILE_ROWS = 1 << 16
#: a window may end at the latest snapshot (:meth:`SummaryWindow.take_ready`) when that is at most this share of
#: the window before the log: 0.5 s before a log of a 5 s window or longer
READY_LAG_SHARE = 0.1
#: the pseudo-channel prefix of phase shares
PHASE = "phase/"


@dataclass(frozen=True)
class Summary:
    """One summary: ``stat`` of ``channel`` (a channel name or a glob with one ``*``; ``phase/<name>`` for
    ``share``), logged as :data:`PREFIX` + ``name`` (``{}`` in ``name``: the text the ``*`` matched), or the
    derived name (module docstring) when ``name`` is None.

    Raises:
        ValueError: an unknown statistic, ``share`` of a channel (or another statistic of a phase), a glob with
            more than one ``*``.
    """

    channel: str
    stat: str
    name: Optional[str] = None

    def __post_init__(self) -> None:
        if self.stat not in STATISTICS:
            raise ValueError(f"unknown summary statistic {self.stat!r} (one of {', '.join(STATISTICS)})")
        if (self.stat == "share") != self.channel.startswith(PHASE):
            raise ValueError(f"summary {self.channel}:{self.stat}: 'share' is the statistic of phases "
                             f"({PHASE}<name>) and phases have no other")
        if self.channel.count("*") > 1 or any(c in self.channel for c in "?["):
            raise ValueError(f"summary channel {self.channel!r}: a channel name or a glob with one '*'")

    def label(self, channel: str) -> str:
        """The name logged (without the prefix) for the concrete ``channel`` this summary matched."""
        if self.name is not None:
            if "{}" not in self.name:
                return self.name
            return self.name.replace("{}", _star(self.channel, channel))
        return f"{_derived(channel)}_{self.stat}"


def _derived(channel: str) -> str:
    """``gpu/0/energy_joules`` -> ``gpu0_energy_joules``; ``cpu/percent`` -> ``cpu_percent``."""
    return re.sub(r"/(?=\d+(/|$))", "", channel).replace("/", "_")


#: the default set (module docstring)
DEFAULT_SUMMARIES = (
    Summary("cpu/percent", "mean"),
    Summary("cpu/percent", "max"),
    Summary("memory/used_bytes", "max"),
    Summary("pressure/io/some_seconds_per_second", "mean", "io_stall_share"),
    Summary("phase/dataloader", "share", "dataloader_wait_share"),
    Summary("gpu/*/utilization_percent", "mean"),
    Summary("gpu/*/sm_active_percent", "mean"),
    Summary("gpu/*/memory_used_bytes", "max"),
    Summary("gpu/*/energy_joules", "delta", "gpu{}_energy_joules"),
)


def parse_summaries(spec: Union[None, bool, Sequence[Union[str, Summary]]]) -> tuple:
    """The :class:`Summary` tuple a ``summaries=`` argument means (module docstring).

    Raises:
        ValueError: an item that is neither a Summary nor a ``"channel:stat"`` string, or a bad summary.
    """
    if spec is None or spec is True:
        return DEFAULT_SUMMARIES
    if spec is False:
        return ()
    if isinstance(spec, (str, Summary)):
        spec = [spec]
    out = []
    for item in spec:
        if isinstance(item, Summary):
            out.append(item)
            continue
        if not isinstance(item, str) or ":" not in item:
            raise ValueError(f"summaries: {item!r} is neither a sysprof Summary nor a 'channel:stat' string "
                             f"(e.g. 'cpu/percent:p95')")
        channel, _, stat = item.rpartition(":")
        out.append(Summary(channel, stat))
    return tuple(out)


class SummaryWindow:
    """The running summary of one recording: :meth:`bind` it to the sampler's channels, :meth:`add` every
    drained batch and :meth:`add_span` every phase, :meth:`take` at each log. Thread-safe (one lock)."""

    def __init__(self, summaries: Union[None, bool, Sequence[Union[str, Summary]]] = None,
                 prefix: str = PREFIX) -> None:
        self.summaries = parse_summaries(summaries)
        self.prefix = prefix
        self.phases = frozenset(s.channel[len(PHASE):] for s in self.summaries if s.stat == "share")
        self._lock = threading.RLock()  # re-entered by a stop from a signal handler that interrupted a take
        self._plan: List[tuple] = []  # (logged name, column index or phase name, stat)
        self._cols = np.zeros(0, dtype=np.intp)
        self._quantile_cols: List[int] = []
        self._spans: list = []
        self._window_start_ns = time.time_ns()
        self._ready: Optional[tuple] = None  # (summaries, end ns) of the window as of the latest snapshot
        self._reset_due = False  # a take_ready() ended the window: reset before the next fold
        self._reset(first=True)

    # ---- set-up ----
    def bind(self, channels: Iterable[str]) -> None:
        """Resolve the summaries against the sampler's ``channels`` (in column order); starts a new window."""
        channels = list(channels)
        plan, cols = [], []
        for s in self.summaries:
            if s.stat == "share":
                plan.append((self.prefix + s.label(s.channel), s.channel[len(PHASE):], "share"))
                continue
            for ch in channels:
                if ch == s.channel or ("*" in s.channel and fnmatch.fnmatchcase(ch, s.channel)
                                       and "/" not in _star(s.channel, ch)):
                    if ch not in cols:
                        cols.append(ch)
                    plan.append((self.prefix + s.label(ch), cols.index(ch), s.stat))
        index = {ch: i for i, ch in enumerate(channels)}
        with self._lock:
            self._cols = np.asarray([index[ch] for ch in cols], dtype=np.intp)
            self._plan = plan
            self._quantile_cols = sorted({c for _, c, st in plan if st in _QUANTILES})
            self._reset(first=True)
            self._window_start_ns = time.time_ns()

    @property
    def names(self) -> List[str]:
        """The names :meth:`take` returns (after :meth:`bind`)."""
        return [name for name, _, _ in self._plan]

    def _reset(self, first: bool) -> None:
        k = len(self._cols)
        nan = np.full(k, np.nan)
        self._count = np.zeros(k)
        self._sum = np.zeros(k)
        self._min = np.full(k, np.inf)
        self._max = np.full(k, -np.inf)
        self._first = nan.copy()
        if first:
            self._last = nan.copy()  # carried over windows: the base of the next window's delta
        self._base = self._last.copy()
        self._quantile_rows: list = []
        self._quantile_n = 0

    # ---- feeding ----
    def add(self, batch, snapshot_ns: Optional[int] = None) -> None:
        """Fold a drained :class:`sysprof.Batch` into the window (its NaN are unknown: left out); with
        ``snapshot_ns``, then compute the window's summaries as of then, for :meth:`take_ready` (one lock hold)."""
        with self._lock:
            self._reset_if_due()
            if len(batch) and len(self._cols):
                self._fold(batch)
                self._ready = None  # rows after the snapshot: it no longer ends the window
            if snapshot_ns is not None:
                self._ready = (self._values(self._window_start_ns, snapshot_ns, self._spans), snapshot_ns)

    def _fold(self, batch) -> None:
        v = batch.values[:, self._cols]
        bad = ~np.isfinite(v)
        if not bad.any():  # the usual batch: every value known (fewer numpy calls: a log step folds on its thread)
            self._count += v.shape[0]
            self._sum += v.sum(axis=0)
            np.fmin(self._min, v.min(axis=0), out=self._min)
            np.fmax(self._max, v.max(axis=0), out=self._max)
            unset = np.isnan(self._first)
            self._first[unset] = v[0, unset]
            self._last[:] = v[-1]
        else:
            ok = ~bad
            n = ok.sum(axis=0)
            if not n.any():
                return
            self._count += n
            self._sum += np.where(ok, v, 0.0).sum(axis=0)
            self._min = np.fmin(self._min, np.where(ok, v, np.inf).min(axis=0))
            self._max = np.fmax(self._max, np.where(ok, v, -np.inf).max(axis=0))
            has = n > 0
            first_idx = ok.argmax(axis=0)
            last_idx = v.shape[0] - 1 - ok[::-1].argmax(axis=0)
            cols = np.arange(v.shape[1])
            new_first = has & ~np.isfinite(self._first)
            self._first[new_first] = v[first_idx, cols][new_first]
            self._last[has] = v[last_idx, cols][has]
        if self._quantile_cols:
            self._quantile_rows.append(v[:, self._quantile_cols])
            self._quantile_n += v.shape[0]
            while self._quantile_n - self._quantile_rows[0].shape[0] >= QUANTILE_ROWS:
                self._quantile_n -= self._quantile_rows.pop(0).shape[0]

    def add_span(self, name: str, start_ns: int, end_ns: int) -> None:
        """A phase from ``start_ns`` to ``end_ns`` (wall-clock ns); kept only when a ``share`` asks for it."""
        if name in self.phases:
            with self._lock:
                self._spans.append((name, start_ns, end_ns))

    # ---- logging ----
    def take(self, now_ns: Optional[int] = None) -> Dict[str, float]:
        """``{name: value}`` of the window that ends now (``now_ns``, wall-clock ns), and a new window begins.
        NaN: the window had no finite sample of that channel (no phase time is 0.0, not NaN)."""
        now = time.time_ns() if now_ns is None else int(now_ns)
        with self._lock:
            self._reset_if_due()
            out = self._values(self._window_start_ns, now, self._spans)
            self._end_window(now)
            self._reset(first=False)
        return out

    def take_ready(self, now_ns: Optional[int] = None) -> Optional[Dict[str, float]]:
        """The summaries of the latest ``add(..., snapshot_ns=T)``, the window then ending at T (the folding is
        left for the next :meth:`add`): a lock, no arithmetic. None (take nothing) when none came since the previous
        take, or when T is more than :data:`READY_LAG_SHARE` of the window before ``now_ns`` (default now): a log
        every few hundred ms is summarised up to the log, by :meth:`take`."""
        now = time.time_ns() if now_ns is None else int(now_ns)
        with self._lock:
            ready = self._ready
            if ready is None or now - ready[1] > READY_LAG_SHARE * (now - self._window_start_ns):
                return None
            self._end_window(ready[1])
            self._reset_due = True
            return ready[0]

    def _reset_if_due(self) -> None:
        """The reset a take_ready() left for the next fold or take (the lock held)."""
        if self._reset_due:
            self._reset_due = False
            self._reset(first=False)

    def _end_window(self, end_ns: int) -> None:
        self._window_start_ns = end_ns
        self._ready = None
        self._spans = [s for s in self._spans if s[2] > end_ns]  # a span across the end: its rest is the next's

    def _values(self, start: int, now: int, spans: list) -> Dict[str, float]:
        quantiles = self._quantiles()
        return {name: self._value(col, stat, start, now, spans, quantiles) for name, col, stat in self._plan}

    def _quantiles(self) -> dict:
        if not self._quantile_rows:
            return {}
        from sysprof.report.stats import weighted_quantile

        rows = np.concatenate(self._quantile_rows, axis=0)
        out = {}
        for j, col in enumerate(self._quantile_cols):
            values = rows[:, j]
            for stat, q in _QUANTILES.items():
                value = weighted_quantile(values, np.ones_like(values), q)
                out[(col, stat)] = math.nan if value is None else value
        return out

    def _value(self, col, stat, start, now, spans, quantiles) -> float:
        if stat == "share":
            if now <= start:
                return math.nan
            inside = sum(max(0, min(e, now) - max(s, start)) for n, s, e in spans if n == col)
            return min(1.0, inside / (now - start))
        if not self._count[col]:
            return math.nan
        if stat == "mean":
            return float(min(max(self._sum[col] / self._count[col], self._min[col]), self._max[col]))
        if stat == "min":
            return float(self._min[col])
        if stat == "max":
            return float(self._max[col])
        if stat == "last":
            return float(self._last[col])
        if stat == "delta":
            base = self._base[col] if math.isfinite(self._base[col]) else self._first[col]
            d = float(self._last[col] - base)
            return d if d >= 0 else math.nan
        return quantiles.get((col, stat), math.nan)


def _star(pattern: str, channel: str) -> str:
    """The text the one ``*`` of ``pattern`` matched in ``channel``."""
    head, _, tail = pattern.partition("*")
    return channel[len(head):len(channel) - len(tail)]


class SummarySink(Sink):
    """A :class:`SummaryWindow` as a sink of a recording session (:class:`sysprof.pipeline.Session`): bound to the
    session's channels at its start; at each drain the spans of category ``spans`` among the chunk's events (the
    trainer's phases) first, then the rows. With ``snapshots``, a drain leaves the window's summaries ready for
    the next log step (:meth:`SummaryWindow.take_ready`); the owner turns :attr:`snapshots` off around a drain of
    its own."""

    name = "summaries"

    def __init__(self, window: SummaryWindow, *, snapshots: bool = False, spans: Optional[str] = None) -> None:
        self.window = window
        self.snapshots = snapshots
        self.spans = spans

    def open(self, start) -> None:
        self.window.bind(start.channels)

    def take(self, chunk) -> None:
        if self.spans is not None:
            for e in chunk.events:
                if e.kind == SPAN and e.cat == self.spans:
                    self.window.add_span(e.name, e.t_ns, e.t_ns + e.dur_ns)
        self.window.add(chunk.batch, snapshot_ns=chunk.t_ns if self.snapshots else None)
