"""The derivation rules of the portable backend, in one place: the Python statement of
csrc/derive/rules.hpp, for machines where the extension is missing. Each class names its native twin;
tests/test_sampler_live.py checks both give the same values, tests/test_sampler_live_psutil.py each rule."""
from __future__ import annotations

import math
from collections import deque
from typing import Dict, List, Optional, Sequence, Tuple

NAN = math.nan
N_MODES = 8  # /proc/stat modes: user nice system idle iowait irq softirq steal

__all__ = ["Counter", "TrailingRate", "Ticks", "CounterDevice", "RateCounter", "EnergyPower"]


class Counter:
    """A monotonically increasing kernel counter, as csrc/derive/rules.hpp's ``Counter``: a decrease from
    below 2**32 is a 32-bit wrap and is unwrapped (the total stays monotonic); any other decrease is
    a reset and gives a delta of 0."""

    WRAP = 1 << 32

    def __init__(self) -> None:
        self.prev: Optional[int] = None  # None: no baseline (first read, or the device went away)
        self.offset = 0  # added by unwrapping

    def update(self, raw: int) -> int:
        """The delta since the previous update (0 on the first one)."""
        prev, self.prev = self.prev, raw
        if prev is None:
            return 0
        if raw >= prev:
            return raw - prev
        if prev < self.WRAP:
            self.offset += self.WRAP
            return raw + self.WRAP - prev
        return 0

    @property
    def total(self) -> int:
        return self.prev + self.offset


class TrailingRate:
    """Per-second rate of a cumulative time counter that advances in scheduler-tick steps, as
    csrc/derive/rules.hpp's ``TrailingRate``: over the trailing ``WINDOW_NS`` (or the last interval when
    that is longer), NaN until the history spans the window."""

    WINDOW_NS = 20_000_000
    HIST = 256  # spans the window down to ~80 us intervals

    def __init__(self) -> None:
        self.hist: deque = deque(maxlen=self.HIST)  # (mono_ns, value), oldest first

    def update(self, mono_ns: int, value: int) -> float:
        then = next((r for r in reversed(self.hist) if mono_ns - r[0] >= self.WINDOW_NS), None)
        if then is None and len(self.hist) == self.HIST:
            then = self.hist[0]  # history shorter than the window: use it all
        out = NAN
        if then is not None and mono_ns > then[0]:
            out = max(0, value - then[1]) * 1e9 / (mono_ns - then[0])
        self.hist.append((mono_ns, value))
        return out


class Ticks:
    """/proc/stat percents from tick deltas, as csrc/derive/rules.hpp's ``TickState``: a field that goes
    backwards contributes 0 and is re-based; with no tick elapsed the previous percents are repeated;
    NaN before the first."""

    def __init__(self) -> None:
        self.prev: Optional[List[float]] = None
        self.last = [NAN] * (N_MODES + 1)

    def update(self, now: Optional[Sequence[float]]) -> List[float]:
        if now is None:  # offline: re-prime when it comes back
            self.prev, self.last = None, [NAN] * (N_MODES + 1)
            return self.last
        if self.prev is None:
            self.prev = list(now)
            return self.last
        d = [n - p if n >= p else 0.0 for n, p in zip(now, self.prev)]
        self.prev = [min(n, p) for n, p in zip(now, self.prev)]  # re-base backwards fields
        total = sum(d)
        if total > 0:
            busy = total - d[3] - d[4]
            self.last = [100.0 * busy / total] + [100.0 * x / total for x in d]
            self.prev = list(now)
        return self.last


class CounterDevice:
    """Totals and per-second rates of one device's counters (native ``CounterDevice``, csrc/sources/file_source.hpp).

    ``fields``: (channel field, attribute, units per kernel unit, channel units per kernel unit); ``caps``: the
    largest rate of a field (utilisation: 1)."""

    def __init__(self, fields: Sequence[Tuple[str, str, int, float]], rates: Sequence[str],
                 caps: Optional[Dict[str, float]] = None) -> None:
        self.caps = caps or {}
        self.fields, self.rates = fields, [i for i, f in enumerate(fields) if f[0] in rates]
        self.counters = [Counter() for _ in fields]
        self.last_ns: Optional[int] = None

    def row(self, now, t_ns: int) -> List[float]:
        if now is None:  # gone: re-primed when it returns
            self.last_ns = None
            for c in self.counters:
                c.prev = None
            return [NAN] * (len(self.fields) + len(self.rates))
        dt = (t_ns - self.last_ns) / 1e9 if self.last_ns is not None else 0.0
        self.last_ns = t_ns
        totals, deltas = [], []
        for (name, attr, div, scale), c in zip(self.fields, self.counters):
            raw = getattr(now, attr, None)
            if raw is None:  # not provided on this platform
                totals.append(NAN)
                deltas.append(NAN)
                continue
            deltas.append(c.update(int(raw) // div) * scale)
            totals.append(c.total * scale)
        out = totals
        for i in self.rates:
            r = deltas[i] / dt if dt > 0 else NAN
            out.append(min(r, self.caps.get(self.fields[i][0], math.inf)))
        return out


class RateCounter:
    """A byte counter's per-second rate since its previous read, through :class:`Counter` (native ``RateCounter``)."""

    def __init__(self) -> None:
        self.c = Counter()
        self.t = 0.0

    def rate(self, raw: int, t: float) -> float:
        had, prev_t = self.c.prev is not None, self.t
        d = self.c.update(raw)
        self.t = t
        return d / (t - prev_t) if had and t > prev_t else NAN


class EnergyPower:
    """Power between the two latest reads at which the energy counter moved (native ``EnergyPower``)."""

    def __init__(self) -> None:
        self.ref: Optional[int] = None
        self.t_ref = 0.0
        self.moved = False
        self.watts = NAN

    def update(self, mj: int, t: float) -> float:
        if self.ref is None or mj < self.ref:
            self.ref, self.t_ref, self.moved, self.watts = mj, t, False, NAN
        elif mj != self.ref:
            if self.moved and t > self.t_ref:
                self.watts = (mj - self.ref) / 1000.0 / (t - self.t_ref)
            self.ref, self.t_ref, self.moved = mj, t, True
        return self.watts
