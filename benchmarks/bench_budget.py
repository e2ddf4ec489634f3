"""The CPU budget (issue 28): the CPU sysprof's sampling threads use at 1 ms against the budget asked, per source set.

    python benchmarks/bench_budget.py [--quick] [--budgets 0.05 0.02] [--seconds S] [--rounds N]

For each source set at 1 ms, interleaved rounds of: the Sampler with no budget, then with each budget asked. Each
run starts the sampler, lets the budget settle (``settle`` s: its first evaluations come every 0.25 s), then
measures the threads' CPU over ``seconds`` s as this process's CPU time (``time.process_time``) while the main
thread sleeps: a reader independent of the sampler's own ``stats["cpu_seconds_total"]``, which is reported beside
it. "measured / asked" is the share of one core over the budget asked; where the set costs less than the budget
unbudgeted, the budget does not bind and the ratio only says how far under it the set runs. The goal (issue 28,
item 4): the budget holds within 25 % of its value, measured / asked <= 1.25, for every set that it binds.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Dict, List, Optional

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from bench_util import NO_SOURCES, dist, fmt, table  # noqa: E402

GOAL = 1.25  # measured <= 1.25 x asked where the budget binds


def source_sets(sysprof) -> List[tuple]:
    """(name, Sampler keywords) of every source alone that has channels here, the default set and every host source."""
    from sysprof.sampling.registry import DEFAULT_SOURCES, SOURCES

    off = {n: False for n in SOURCES}
    out = []
    singles = [(n, {n: True}) for n in SOURCES if n != "gpu"] + [("cpu per_cpu", {"cpu": True, "per_cpu": True})]
    for name, on in singles:
        kw = dict(off, **on)
        try:
            s = sysprof.Sampler(interval=1e-3, budget=None, **kw)
        except (ValueError, TypeError):
            continue
        if s.channels:
            out.append((name, kw))
    out.append(("default set", dict(off, **{n: True for n in DEFAULT_SOURCES})))
    host = [n for n, _ in out if " " not in n]
    out.append(("every source", dict(off, **{n: True for n in host}, per_cpu=True)))
    return out


def one_run(sysprof, kw: Dict[str, bool], budget: Optional[float], settle: float, seconds: float) -> Dict[str, Any]:
    s = sysprof.Sampler(interval=1e-3, budget=budget, capacity=1 << 16, **kw)
    s.start()
    time.sleep(settle)
    s.drain()
    st0, c0, t0 = s.stats, time.process_time(), time.monotonic()
    end = t0 + seconds
    while time.monotonic() < end:  # drained every 0.5 s so that the ring never fills (a drain costs this process)
        time.sleep(min(0.5, max(0.0, end - time.monotonic())))
        s.drain()
    c1, t1 = time.process_time(), time.monotonic()
    st1 = s.stats
    s.stop()
    return {"share": (c1 - c0) / (t1 - t0), "own_share": (st1["cpu_seconds_total"] - st0["cpu_seconds_total"]) /
            (t1 - t0), "intervals": dict(s.intervals), "changes": len(s.interval_changes),
            "missed": st1["missed_deadlines"] - st0["missed_deadlines"], "budget_note": s.errors.get("budget")}


def resolution(sysprof, sets: List[tuple], seconds: float) -> Dict[str, Any]:
    """Each source alone, read every 1 ms (its interval given, no budget): the share of rows in which one of its
    values changed from the row before, and the median run of unchanged rows: what its default interval rests on."""
    out = {}
    for name, kw in sets:
        if name in ("default set", "every source"):
            continue
        src = name.split()[0]
        s = sysprof.Sampler(interval=1e-3, budget=None, intervals={src: 1e-3}, capacity=1 << 16, **kw)
        with s:
            time.sleep(seconds)
        b = s.drain()
        v = b.values[1:-1]  # the first and the last rows read every source whatever its interval
        if len(v) < 3:
            continue
        same = (v[1:] == v[:-1]) | (np.isnan(v[1:]) & np.isnan(v[:-1]))
        changed = ~same.all(axis=1)
        runs, n = [], 1
        for c in changed:
            if c:
                runs.append(n)
                n = 1
            else:
                n += 1
        runs.append(n)
        out[name] = {"rows": int(len(v)), "changed_share": float(changed.mean()),
                     "median_run_rows": float(np.median(runs)), "channels": int(v.shape[1])}
    return out


def bench_budget(cfg: Dict[str, Any], sysprof) -> Dict[str, Any]:
    budgets, settle, seconds, rounds = cfg["budgets"], cfg["settle"], cfg["seconds"], cfg["rounds"]
    sets = source_sets(sysprof)
    if cfg.get("sets"):
        sets = [s for s in sets if s[0] in cfg["sets"]]
    raw: Dict[str, Dict[str, List[Dict[str, Any]]]] = {n: {"none": [], **{str(b): [] for b in budgets}} for n, _ in sets}
    for _ in range(rounds):
        for name, kw in sets:
            raw[name]["none"].append(one_run(sysprof, kw, None, settle, seconds))
            for b in budgets:
                raw[name][str(b)].append(one_run(sysprof, kw, b, settle, seconds))
    rows = {}
    for name, _ in sets:
        free = [r["share"] for r in raw[name]["none"]]
        row = {"unbudgeted": dist(np.asarray(free) * 100, "%"), "budgets": {}}
        for b in budgets:
            runs = raw[name][str(b)]
            shares = np.asarray([r["share"] for r in runs])
            ratios = shares / b
            binds = float(np.median(free)) > b
            row["budgets"][str(b)] = {
                "asked_percent": 100 * b, "measured": dist(shares * 100, "%"),
                "own_measure": dist(np.asarray([r["own_share"] for r in runs]) * 100, "%"),
                "measured_over_asked": dist(ratios, "x"), "binds": binds,
                "ok": bool(np.max(ratios) <= GOAL) if binds else None,
                "intervals_s": runs[-1]["intervals"], "changes": [r["changes"] for r in runs],
                "note": runs[-1]["budget_note"], "missed_deadlines": [r["missed"] for r in runs]}
        rows[name] = row
    return {"available": True, "sets": rows, "resolution": resolution(sysprof, sets, cfg.get("resolution_s", seconds)),
            "budgets": budgets, "settle_s": settle, "seconds": seconds,
            "rounds": rounds, "goal": GOAL,
            "method": ("1 ms; interleaved rounds (no budget, then each budget); after settle_s, this process's CPU "
                       "time over the measured seconds while the main thread sleeps (own_measure: the sampler's "
                       "stats['cpu_seconds_total'] over the same span)")}


def print_budget(res: Dict[str, Any]) -> str:
    if not res.get("available"):
        return f"## CPU budget\n\n{res.get('reason')}\n"
    head = ["set", "no budget % (median, range)"]
    for b in res["budgets"]:
        head += [f"asked {100 * b:g} %: measured % (median, range)", "max measured/asked", "binds, ok",
                 "intervals at the end"]
    rows = []
    for name, r in res["sets"].items():
        u = r["unbudgeted"]
        row = [name, f"{fmt(u['median'])} ({fmt(u['min'])}–{fmt(u['max'])})"]
        for b in res["budgets"]:
            x = r["budgets"][str(b)]
            m = x["measured"]
            iv = ", ".join(f"{k} {v * 1e3:g}" for k, v in x["intervals_s"].items()) + " ms"
            row += [f"{fmt(m['median'])} ({fmt(m['min'])}–{fmt(m['max'])})", fmt(x["measured_over_asked"]["max"]),
                    "yes, " + ("ok" if x["ok"] else "MISSED") if x["binds"] else "no", iv]
        rows.append(row)
    res_rows = [[n, r["channels"], f"{100 * r['changed_share']:.1f} %", fmt(r["median_run_rows"])]
                for n, r in res.get("resolution", {}).items()]
    resolution_text = ("\n\nEach source alone read every 1 ms (no budget): rows in which one of its values "
                       "changed, and the median run of unchanged rows (what its default interval rests on):\n\n" +
                       table(["source", "channels", "rows changed", "median run (rows)"], res_rows)) if res_rows else ""
    return (f"## CPU budget at 1 ms\n\n" + table(head, rows) +
            f"\n\n{res['rounds']} rounds of {res['seconds']:g} s after {res['settle_s']:g} s to settle; CPU as this "
            "process's CPU time while the main thread sleeps. The budget binds where the set costs more than it "
            f"unbudgeted; the goal there: measured ≤ {res['goal']:g} × asked in every round." + resolution_text + "\n")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--budgets", type=float, nargs="+", default=None)
    ap.add_argument("--seconds", type=float, default=None)
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--sets", nargs="+", default=None, help="only these sets (names as printed)")
    a = ap.parse_args()
    import sysprof

    c = {"budgets": [0.05], "settle": 2.0, "seconds": 2.0, "rounds": 1} if a.quick else \
        {"budgets": [0.05, 0.02], "settle": 3.0, "seconds": 4.0, "rounds": 3}
    if a.budgets:
        c["budgets"] = a.budgets
    if a.seconds:
        c["seconds"] = a.seconds
    if a.rounds:
        c["rounds"] = a.rounds
    c["sets"] = a.sets
    print(print_budget(bench_budget(c, sysprof)))
