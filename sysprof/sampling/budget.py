"""The CPU budget of sysprof's sampling threads: ``Sampler(budget=...)``, ``--budget``.

A fraction of one core (default :data:`DEFAULT_BUDGET`, 5 %) that sysprof's own sampling threads may use: the
sampling thread and the sources' helper threads (the NVML reader, process_tree's smaps reader). Their CPU is
measured as they run; where it exceeds the budget over the last second, the intervals of the costliest sources are
doubled until the threads' modelled cost is at 80 % of it (an interval the user gave for a source only once every
other source is at its longest, 10 s), and relaxed again, one halving at a time, never below where they started,
once the threads stay under half the budget. Rows still come every ``interval``: a stretched source repeats its
previous values in between. Every change is in ``Sampler.errors["budget"]`` (the latest), ``Sampler.intervals``
(now), ``Sampler.interval_changes`` (all of them) and the trace (a ``sysprof intervals`` instant event at each
change, and the stop event's ``interval_changes``).

The native engine does this on its thread (csrc/engine/budget.hpp, where the measuring is described); this module
holds the argument's rules, the trace's form of the changes and the planner's Python twin, which the psutil
backend runs on its own thread (a test checks the two planners agree).
"""
from __future__ import annotations

import math
import os
import time
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

#: the default budget: 5 % of one core, or what :data:`BUDGET_ENV` says
DEFAULT_BUDGET = 0.05
#: where set, the budget of every Sampler (and CLI run, callback) not given one: ``5%``, ``0.02``, ``none``
BUDGET_ENV = "SYSPROF_BUDGET"
#: the metadata event's name: an instant at each change, args ``{"changes": [...], "intervals_s": {...}}``
INTERVALS_EVENT = "sysprof intervals"
#: tests only: ``"cpu=200000,memory=0"`` fixes each source's CPU per read (ns) the budget decides by
TEST_COST_ENV = "SYSPROF_TEST_BUDGET_COST"

# the planner's constants, as csrc/engine/budget.hpp's
EVAL_S = 0.25
WINDOW_EVALS = 4
RELAX_AFTER_EVALS = 8
STRETCH_TO = 0.8
RELAX_BELOW = 0.5
RELAX_TO = 0.7
MIN_SOURCE_SHARE = 0.2
MAX_STRETCH_S = 10.0


def check_budget(budget: object, name: str = "budget") -> float:
    """The budget as the engine takes it: a fraction in (0, 1], 0 for None; ``"default"``: :data:`BUDGET_ENV`'s
    where set, else :data:`DEFAULT_BUDGET`. ValueError naming ``name`` (or the variable) otherwise."""
    if budget is None:
        return 0.0
    if isinstance(budget, str) and budget == "default":
        env = os.environ.get(BUDGET_ENV)
        if env is None or not env.strip():
            return DEFAULT_BUDGET
        try:
            return parse_budget(env) or 0.0
        except ValueError as e:
            raise ValueError(f"${BUDGET_ENV}: {e}") from None
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not 0 < budget <= 1:
        raise ValueError(f"{name} must be a fraction of one core in (0, 1] (0.05: 5 %) or None, got {budget!r}")
    return float(budget)


def parse_budget(text: str) -> Optional[float]:
    """``--budget``: ``5%``, ``0.05`` or ``none``/``off`` -> a fraction (None: no budget); ValueError otherwise."""
    t = str(text).strip().lower()
    if t in ("none", "off"):
        return None
    try:
        value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        value = math.nan
    if not 0 < value <= 1:
        raise ValueError(f"invalid budget {text!r}: a share of one core in (0, 1] as 5% or 0.05, or none")
    return value


def test_costs(sources: Sequence[str]) -> Dict[str, int]:
    """The costs :data:`TEST_COST_ENV` fixes, for the sources given ({} unset)."""
    raw = os.environ.get(TEST_COST_ENV, "")
    out = {}
    for item in filter(None, (p.strip() for p in raw.split(","))):
        name, _, ns = item.partition("=")
        if name in sources:
            out[name] = int(ns)
    return out


# ---- the planner (csrc/engine/budget.cpp's plan_stretch, plan_relax) ----
def plan_cost(fixed_ns: float, cost_ns: Sequence[float], periods: Sequence[int]) -> float:
    """The threads' CPU per row (ns) at ``periods`` (summed in the native order: the same rounding)."""
    total = fixed_ns
    for c, p in zip(cost_ns, periods):
        total += c / p
    return total


def plan_stretch(budget: float, interval_ns: int, fixed_ns: float, cost_ns: Sequence[float], cap: Sequence[int],
                 period: Sequence[int], given: Sequence[bool]) -> Tuple[List[int], bool]:
    """The periods after a stretch, and whether they fit :data:`STRETCH_TO` of the budget (the native rules)."""
    p = list(period)
    target = STRETCH_TO * budget * interval_ns
    goal = max(target, fixed_ns + MIN_SOURCE_SHARE * target)
    while plan_cost(fixed_ns, cost_ns, p) > goal:
        pick = None
        for given_pass in (False, True):  # the defaults first, then the given ones
            most = 0.0
            for i in range(len(p)):
                if bool(given[i]) != given_pass or p[i] >= cap[i]:
                    continue
                if cost_ns[i] / p[i] > most:
                    most, pick = cost_ns[i] / p[i], i
            if pick is not None:
                break
        if pick is None:
            break
        p[pick] = min(cap[pick], p[pick] * 2)
    return p, plan_cost(fixed_ns, cost_ns, p) <= target


def plan_relax(budget: float, interval_ns: int, fixed_ns: float, cost_ns: Sequence[float], floor: Sequence[int],
               period: Sequence[int], given: Sequence[bool]) -> List[int]:
    """The periods after one relax step (unchanged where none fits :data:`RELAX_TO` of the budget)."""
    limit = RELAX_TO * budget * interval_ns
    order = []
    for i, p in enumerate(period):
        if p <= floor[i]:
            continue
        half = max(floor[i], (p + 1) // 2)
        order.append((0 if given[i] else 1, cost_ns[i] / half - cost_ns[i] / p, i))
    for _, _, i in sorted(order, key=lambda o: (o[0], o[1])):
        p = list(period)
        p[i] = max(floor[i], (p[i] + 1) // 2)
        if plan_cost(fixed_ns, cost_ns, p) <= limit:
            return p
    return list(period)


def _duration(s: float) -> str:
    return f"{s * 1e6:.3g} us" if s < 1e-3 else f"{s * 1e3:.3g} ms" if s < 1 else f"{s:.3g} s"


class Controller:
    """The psutil backend's budget: the native Controller's rules on the Python sampling thread. The thread's CPU is
    its CPU-time clock (``time.thread_time_ns``), each source's cost the wall time of its reads (a Python thread
    holds the GIL while it reads: its wall time is its CPU, less what other threads take of the GIL)."""

    def __init__(self, budget: float, interval_s: float, names: Sequence[str], periods: Sequence[int],
                 given: Sequence[bool], test_cost_ns: Optional[Mapping[str, int]] = None) -> None:
        self.budget = budget
        self.interval_ns = max(1, int(round(interval_s * 1e9)))
        self.names = list(names)
        self.floor = list(periods)
        longest = math.ceil(MAX_STRETCH_S * 1e9 / self.interval_ns)
        self.cap = [max(f, longest) for f in self.floor]
        self.given = [bool(g) for g in given]
        self.test = dict(test_cost_ns) if test_cost_ns else None
        self.cost_ns = [0.0] * len(self.names)
        self.read_ns = [0] * len(self.names)  # wall time of the reads since the last evaluation
        self.reads = [0] * len(self.names)
        self.windows: List[Tuple[int, int, List[int], List[int]]] = []  # (span, cpu, read ns, reads)
        self.since_change = 0
        self.said_unfit = False
        self.cpu_total_ns = 0
        self.fraction = math.nan
        self.changes: List[dict] = []
        self.next_eval = None
        self.start_ns = self.cpu_at = 0

    def start(self, mono_ns: int) -> None:
        self.start_ns, self.next_eval, self.cpu_at = mono_ns, mono_ns + int(EVAL_S * 1e9), time.thread_time_ns()
        self.read_ns = [0] * len(self.names)
        self.reads = [0] * len(self.names)
        self.windows = []

    def read(self, i: int, ns: int) -> None:
        self.read_ns[i] += ns
        self.reads[i] += 1

    def tick(self, mono_ns: int, periods: List[int], errors: dict) -> None:
        """After a row: every :data:`EVAL_S`, measure and decide (``periods`` changed in place)."""
        if self.next_eval is not None and mono_ns >= self.next_eval:
            self._evaluate(mono_ns, periods, errors, last=False)

    def finish(self, mono_ns: int, periods: List[int], errors: dict) -> None:
        if self.next_eval is not None:
            self._evaluate(mono_ns, periods, errors, last=True)
        self.next_eval = None

    def _evaluate(self, mono_ns, periods, errors, last) -> None:
        cpu = time.thread_time_ns()
        span = max(1, mono_ns - self.start_ns)
        used = max(0, cpu - self.cpu_at)
        self.cpu_total_ns += used
        self.windows = (self.windows + [(span, used, self.read_ns, self.reads)])[-WINDOW_EVALS:]
        self.start_ns, self.cpu_at, self.next_eval = mono_ns, cpu, mono_ns + int(EVAL_S * 1e9)
        self.read_ns = [0] * len(self.names)
        self.reads = [0] * len(self.names)
        total_span = sum(w[0] for w in self.windows)
        total_cpu = sum(w[1] for w in self.windows)
        measured = total_cpu / total_span
        self.fraction = measured
        self.since_change += 1
        if last or not self.budget or not self.names:
            return
        if self.test is not None:
            cost = [float(max(0, self.test.get(n, 0))) for n in self.names]
            fixed = 0.0
            measured = plan_cost(0.0, cost, periods) / self.interval_ns
        else:
            rows = total_span / self.interval_ns
            for i in range(len(self.names)):
                n = sum(w[3][i] for w in self.windows)
                if n:
                    self.cost_ns[i] = sum(w[2][i] for w in self.windows) / n
            cost = list(self.cost_ns)
            fixed = max(0.0, total_cpu / rows - plan_cost(0.0, cost, periods))
        if measured > self.budget:
            to, fits = plan_stretch(self.budget, self.interval_ns, fixed, cost, self.cap, periods, self.given)
            msg = self._apply(to, periods, measured, "over")
            if not fits and (msg or not self.said_unfit):  # with each change while it lasts
                self.said_unfit = True
                msg += ("; " if msg else "") + (
                    f"the budget of {100 * self.budget:.3g} % of a core cannot be met at this interval: the rows "
                    f"themselves cost {100 * fixed / self.interval_ns:.3g} % (the Python thread's own work), which no "
                    "source's interval reduces; a longer interval does")
            if msg:
                errors["budget"] = msg
        elif measured < RELAX_BELOW * self.budget and self.since_change >= RELAX_AFTER_EVALS:
            msg = self._apply(plan_relax(self.budget, self.interval_ns, fixed, cost, self.floor, periods, self.given),
                              periods, measured, "under")
            if msg:
                errors["budget"] = msg

    def _apply(self, to, periods, measured, why) -> str:
        parts = []
        wall = time.time_ns()
        for i, p in enumerate(to):
            if p == periods[i]:
                continue
            prev, periods[i] = periods[i], p
            parts.append(f"{self.names[i]}: interval {_duration(prev * self.interval_ns / 1e9)} -> "
                         f"{_duration(p * self.interval_ns / 1e9)}" +
                         (" (the interval given for it: every other source is at its longest)"
                          if self.given[i] and p > prev else ""))
            if len(self.changes) < 4096:
                self.changes.append({"time_ns": wall, "source": self.names[i], "interval_ns": p * self.interval_ns,
                                     "previous_ns": prev * self.interval_ns, "given": self.given[i],
                                     "cpu_percent": 100 * measured})
        if not parts:
            return ""
        window = EVAL_S * max(1, len(self.windows))
        self.windows = []
        self.since_change = 0
        return (f"{'; '.join(parts)}: sysprof's sampling threads at {100 * measured:.3g} % of a core over the last "
                f"{_duration(window)}, {why} the budget of {100 * self.budget:.3g} %")


# ---- the changes in a trace ----
def change_record(c: Mapping[str, object]) -> dict:
    """One change as the trace holds it: ``{"time_ns", "source", "interval_s", "previous_s", "given", "cpu_percent"}``
    (``Sampler.interval_changes``' entries)."""
    return {"time_ns": int(c["time_ns"]), "source": str(c["source"]), "interval_s": float(c["interval_s"]),
            "previous_s": float(c["previous_s"]), "given": bool(c["given"]), "cpu_percent": float(c["cpu_percent"])}


class ChangeEvents:
    """A sampler's new interval changes since the last call (:meth:`new`: the args of the :data:`INTERVALS_EVENT`
    instants, each at its change's time; the session's producer, ``pipeline.producers.IntervalChanges``, calls it
    at each drain); :meth:`all` lists every change (the stop event's ``interval_changes``)."""

    def __init__(self, sampler) -> None:
        self.sampler = sampler
        self.seen = 0

    def all(self) -> List[dict]:
        return [change_record(c) for c in getattr(self.sampler, "interval_changes", [])]

    def new(self) -> List[Tuple[int, dict]]:
        """``(wall ns, args)`` of the :data:`INTERVALS_EVENT` instants since the last call: one per time a change was
        made (every source changed then), args ``{"changes": [...], "intervals_s": {source: seconds now}}``."""
        changes = self.all()
        fresh, self.seen = changes[self.seen:], len(changes)
        groups: Dict[int, List[dict]] = {}
        for c in fresh:
            groups.setdefault(c["time_ns"], []).append(c)
        now = dict(getattr(self.sampler, "intervals", {}))
        return [(t, {"changes": group, "intervals_s": now}) for t, group in sorted(groups.items())]


def own_cost(meta: Mapping[str, object], stop: Mapping[str, object], duration_s: Optional[float]) -> dict:
    """What ``report`` says of sysprof's own cost: ``sysprof_cpu_percent`` (the sampling threads' CPU over the
    recording, percent of one core: the stop event's ``stats["cpu_seconds_total"]`` over ``duration_s``; None
    without), ``budget_percent`` (the start event's ``budget``; None: none or unknown) and ``interval_changes`` (the
    stop event's list; [] without)."""
    stats = stop.get("stats") if isinstance(stop.get("stats"), dict) else {}
    cpu_s = stats.get("cpu_seconds_total")
    budget = meta.get("budget")
    changes = stop.get("interval_changes")
    return {"sysprof_cpu_percent": 100 * cpu_s / duration_s if isinstance(cpu_s, (int, float)) and math.isfinite(cpu_s)
            and duration_s else None,
            "budget_percent": 100 * budget if isinstance(budget, (int, float)) and budget > 0 else None,
            "interval_changes": [c for c in changes if isinstance(c, dict)] if isinstance(changes, list) else []}


def summary_line(summary: Mapping[str, object]) -> Optional[str]:
    """``report``'s line from :func:`own_cost`'s keys (in ``summary``); None when the trace does not say."""
    share = summary.get("sysprof_cpu_percent")
    if not isinstance(share, (int, float)):
        return None
    budget = summary.get("budget_percent")
    text = f"sampling threads {share:.3g} % of a core" + (f" (budget {budget:.3g} %)" if budget else " (no budget)")
    changes = summary.get("interval_changes") or []
    if changes:
        last: Dict[str, float] = {}
        for c in changes:
            if isinstance(c.get("interval_s"), (int, float)):
                last[str(c.get("source"))] = float(c["interval_s"])
        text += (f"; {len(changes)} interval change{'s' if len(changes) != 1 else ''} by the budget, ending at "
                 + ", ".join(f"{s} {_duration(v)}" for s, v in last.items()))
    return text
