"""The CPU budget of sysprof's sampling threads (issue 28, item 1): ``Sampler(budget=...)``, ``--budget``, the
callbacks' ``budget``; the planner, its stretches and relaxes, and where each change is said.

What the budget decides depends on what the threads cost, which depends on the machine's load; so the decisions
are checked with fixed costs per read (``SYSPROF_TEST_BUDGET_COST``, csrc/engine/budget.hpp's test mode: the model
is then the measure), whose outcome is exact: the periods below are worked out by hand from the rules (double the
source costing most per row, the user's intervals last, until 80 % of the budget). Nothing here asserts a time or
a rate. The suite runs without a budget otherwise (tests/conftest.py)."""
from __future__ import annotations

import json
import math
import os
import random
import time

import numpy as np
import pytest

import sysprof
from sysprof.sampling import budget as B
from sysprof.sampling.sampler import native_available

from cli_support import assert_one_line_error, event, run_cli
from fake_nvml.support import MiB, fake, fake_builds  # noqa: F401 - fake_builds and fake are fixtures
from test_sampler_fixtures import OFF, Tree

needs_native = pytest.mark.skipif(not native_available()[0], reason="native backend unavailable here")
MS = 1_000_000

# the hand-worked case: 5 % of a core at 1 ms is 50 us per row, a stretch aims at 40 us
COSTS = [200_000, 30_000, 100_000, 20_000]  # cpu, memory, disk, net: ns per read
FIXED = 5_000


def native_plan(step, **kw):
    from sysprof import _native

    return _native._budget_plan(step, kw["budget"], kw["interval_ns"], kw["fixed_ns"], kw["cost_ns"], kw["floor"],
                                kw["cap"], kw["period"], kw["given"])


def python_plan(step, **kw):
    if step == "stretch":
        return B.plan_stretch(kw["budget"], kw["interval_ns"], kw["fixed_ns"], kw["cost_ns"], kw["cap"], kw["period"],
                              kw["given"])
    return B.plan_relax(kw["budget"], kw["interval_ns"], kw["fixed_ns"], kw["cost_ns"], kw["floor"], kw["period"],
                        kw["given"]), None


def plans(step, **kw):
    """(periods, fits) of both planners, which must agree; the Python one alone without the extension."""
    py = python_plan(step, **kw)
    if native_available()[0]:
        nat = native_plan(step, **kw)
        assert list(nat[0]) == list(py[0]), (step, kw)
        if step == "stretch":
            assert nat[1] == py[1]
    return list(py[0]), py[1]


def case(**over):
    kw = dict(budget=0.05, interval_ns=MS, fixed_ns=FIXED, cost_ns=COSTS, floor=[1] * 4, cap=[10_000] * 4,
              period=[1] * 4, given=[False] * 4)
    kw.update(over)
    return kw


# --------------------------------------------------------------------------------------------------
# the planner
# --------------------------------------------------------------------------------------------------
def test_stretch_doubles_the_costliest_until_it_fits():
    # per row: 355 us. Doubling the costliest per row each time (ties: the first): cpu 2, 4; disk 2; cpu 8; disk 4;
    # memory 2; cpu 16; disk 8; net 2; memory 4; cpu 32; disk 16 -> 5 + 6.25 + 7.5 + 6.25 + 10 = 35 us <= 40 us
    assert plans("stretch", **case()) == ([32, 4, 16, 2], True)
    assert plans("stretch", **case(cost_ns=[1000] * 4)) == ([1, 1, 1, 1], True)  # 9 us: already fits
    assert plans("stretch", **case(cost_ns=[0] * 4, fixed_ns=60_000)) == ([1, 1, 1, 1], False)  # nothing to stretch


def test_stretch_takes_the_given_intervals_last():
    # cpu given: memory, disk and net go to their longest (8) first: 5 + 3.75 + 12.5 + 2.5 = 23.75 us, then cpu to 16
    # (12.5 us): 36.25 us
    assert plans("stretch", **case(cap=[10_000, 8, 8, 8], given=[True, False, False, False])) == ([16, 8, 8, 8], True)
    # all at their longest and still over: it does not fit, and stops there
    assert plans("stretch", **case(cap=[4] * 4, given=[True, False, False, False])) == ([4, 4, 4, 4], False)


def test_stretch_leaves_the_sources_a_share_where_the_rows_alone_exceed_the_budget():
    # the rows cost 45 us of the 40: the sources are stretched until they take 20 % of 40 us (8 us), no further
    periods, fits = plans("stretch", **case(fixed_ns=45_000, cost_ns=[16_000, 0, 0, 0]))
    assert (periods, fits) == ([2, 1, 1, 1], False)


def test_relax_halves_one_interval_within_the_limit():
    # at 10 % of a core, 70 us per row after a relax; now 30 us: halving cpu (+6.25 us; tied with disk, the first)
    stretched = dict(period=[32, 4, 16, 2], fixed_ns=0)
    assert plans("relax", **case(budget=0.1, **stretched))[0] == [16, 4, 16, 2]
    # a given interval is relaxed first
    assert plans("relax", **case(budget=0.1, given=[False, False, True, False], **stretched))[0] == [32, 4, 8, 2]
    # at 5 %, 35 us allowed: every halving adds too much
    assert plans("relax", **case(**stretched))[0] == [32, 4, 16, 2]
    # never below the floor (where it started), an odd period rounds up
    assert plans("relax", **case(budget=0.1, cost_ns=[0] * 4, floor=[3, 1, 1, 1], period=[5, 1, 1, 1]))[0] == [3, 1, 1, 1]
    assert plans("relax", **case(cost_ns=[0] * 4))[0] == [1, 1, 1, 1]  # all at their floors: nothing


def test_the_native_and_python_planners_agree():
    rnd = random.Random(28)
    for _ in range(400):
        n = rnd.randint(1, 6)
        floor = [rnd.choice([1, 1, 2, 3, 10]) for _ in range(n)]
        kw = dict(budget=rnd.choice([0.01, 0.05, 0.2, 1.0]), interval_ns=rnd.choice([100_000, MS, 10 * MS]),
                  fixed_ns=rnd.choice([0.0, 1000.0, 50_000.0]) * rnd.random(),
                  cost_ns=[rnd.choice([0.0, 1e3, 1e5, 3e6]) * rnd.random() for _ in range(n)], floor=floor,
                  cap=[max(f, rnd.choice([4, 64, 10_000])) for f in floor],
                  period=[f * rnd.choice([1, 2, 4, 7]) for f in floor], given=[rnd.random() < 0.3 for _ in range(n)])
        kw["period"] = [min(p, c) for p, c in zip(kw["period"], kw["cap"])]
        plans("stretch", **kw)
        plans("relax", **kw)


# --------------------------------------------------------------------------------------------------
# arguments
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["native", "psutil"])
def test_budget_argument(monkeypatch, backend):
    if backend == "native" and not native_available()[0]:
        pytest.skip("native backend unavailable here")
    kw = dict(OFF, backend=backend, interval=0.01, memory=True)
    for bad in (0, 0.0, -0.1, 1.5, math.nan, True, "5%", [0.05]):
        with pytest.raises(ValueError, match=r"budget must be a fraction of one core in \(0, 1\]"):
            sysprof.Sampler(budget=bad, **kw)
    assert sysprof.Sampler(budget=0.02, **kw).budget == 0.02
    s = sysprof.Sampler(budget=None, **kw)
    assert s.budget is None and math.isnan(s.stats["budget_percent"])
    monkeypatch.delenv(B.BUDGET_ENV)
    assert sysprof.Sampler(**kw).budget == B.DEFAULT_BUDGET == 0.05
    assert sysprof.Sampler(**kw).stats["budget_percent"] == 5.0
    monkeypatch.setenv(B.BUDGET_ENV, "2%")
    assert sysprof.Sampler(**kw).budget == 0.02
    monkeypatch.setenv(B.BUDGET_ENV, "none")
    assert sysprof.Sampler(**kw).budget is None
    assert sysprof.Sampler(budget=0.3, **kw).budget == 0.3  # given: the variable does not apply
    monkeypatch.setenv(B.BUDGET_ENV, "lots")
    with pytest.raises(ValueError, match=r"\$SYSPROF_BUDGET: invalid budget 'lots'"):
        sysprof.Sampler(**kw)


def test_parse_budget():
    assert B.parse_budget("5%") == 0.05 and B.parse_budget(" 0.02 ") == 0.02 and B.parse_budget("100%") == 1.0
    assert B.parse_budget("none") is None and B.parse_budget("OFF") is None
    for bad in ("0", "0%", "150%", "1.5", "-1%", "five", "", "nan", "5 %%"):
        with pytest.raises(ValueError, match="invalid budget"):
            B.parse_budget(bad)


def test_the_callbacks_take_a_budget(monkeypatch):
    from sysprof.integrations.session import Session

    with pytest.raises(ValueError, match="budget must be a fraction"):
        Session(budget=2)
    assert Session(budget=0.01).settings["budget"] == 0.01
    with pytest.raises(ValueError, match="budget must be a fraction"):
        sysprof.SystemProfiler(budget=0)
    import sysprof.sampling.sampler as sampler_mod

    seen = {}

    class FakeSampler:
        def __init__(self, **kw):
            seen.update(kw)

    monkeypatch.setattr(sampler_mod, "Sampler", FakeSampler)
    sysprof.SystemProfiler(budget=0.02)._make_sampler()
    assert seen["budget"] == 0.02
    sysprof.SystemProfiler(budget=None)._make_sampler()
    assert seen["budget"] is None


# --------------------------------------------------------------------------------------------------
# the sampling thread, with fixed costs per read
# --------------------------------------------------------------------------------------------------
def wait_for(check, what, timeout=60.0):
    """Until check() is true (a bound against a hang, not a timing assert)."""
    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, what
        time.sleep(0.02)


def changes_of(s):
    return [(c["source"], c["previous_s"], c["interval_s"], c["given"]) for c in s.interval_changes]


# At 10 ms and 5 %, 500 us per row; memory costs 2 ms a read and load 0.4 ms: 2.4 ms per row (24 % of a core). The
# stretch: memory 2, 4, 8; load 2; memory 16 -> 125 + 200 = 325 us (3.25 %) <= 400 us, which is stable: over 2.5 %,
# no relax, under 5 %, no stretch.
STRETCHED = {"cpu": 0.01, "memory": 0.16, "load": 0.02}
STRETCH_CHANGES = [("memory", 0.01, 0.16, False), ("load", 0.01, 0.02, False)]


def budget_sampler(monkeypatch, backend, costs, tree=None, **kw):
    monkeypatch.setenv(B.TEST_COST_ENV, costs)
    args = dict(OFF, backend=backend, interval=0.01, budget=0.05, cpu=True, memory=True, load=True, capacity=4096)
    if tree is not None:
        args.update(proc_root=tree.proc, sys_root=tree.sys)
    args.update(kw)
    return sysprof.Sampler(**args)


def check_stretch(s):
    assert s.intervals == {"cpu": 0.01, "memory": 0.01, "load": 0.01}  # cpu: 10 ms by default, as the interval
    with s:
        wait_for(lambda: s.interval_changes, "no interval change")
        changed = time.monotonic()
        wait_for(lambda: time.monotonic() - changed > 2.5, "")  # 10 evaluations: stable (no relax, no stretch)
    assert changes_of(s) == STRETCH_CHANGES
    assert len({c["time_ns"] for c in s.interval_changes}) == 1  # one decision
    assert s.interval_changes[0]["cpu_percent"] == pytest.approx(24.0)  # the model: 2.4 ms per 10 ms row
    assert s.intervals == pytest.approx(STRETCHED)
    msg = s.errors["budget"]
    assert msg.startswith("memory: interval 10 ms -> 160 ms; load: interval 10 ms -> 20 ms: sysprof's sampling "
                          "threads at 24 % of a core over the last "), msg
    assert msg.endswith(", over the budget of 5 %"), msg
    st = s.stats
    assert st["budget_percent"] == 5.0
    assert st["reads"]["memory"] < st["reads"]["cpu"]  # read every 16th row since the change, cpu every row


@needs_native
def test_native_stretches_the_costliest(tmp_path, monkeypatch):
    s = budget_sampler(monkeypatch, "native", "memory=2000000,load=400000", Tree("full", tmp_path))
    check_stretch(s)


def test_psutil_stretches_the_costliest(monkeypatch):
    s = budget_sampler(monkeypatch, "psutil", "memory=2000000,load=400000")
    check_stretch(s)


@needs_native
def test_a_given_interval_is_stretched_last_and_said(tmp_path, monkeypatch):
    # memory given at 20 ms (2 rows): load, the only default that costs, goes to its longest first (10 s: 1000
    # rows, 0.4 us per row), then memory 4, 8: 250 + 0.4 us <= 400 us
    s = budget_sampler(monkeypatch, "native", "memory=2000000,load=400000", Tree("full", tmp_path),
                       intervals={"memory": 0.02})
    with s:
        wait_for(lambda: s.interval_changes, "no interval change")
    assert changes_of(s) == [("memory", 0.02, 0.08, True), ("load", 0.01, 10.0, False)]
    assert s.intervals == pytest.approx({"cpu": 0.01, "memory": 0.08, "load": 10.0})
    assert s.errors["budget"].startswith("memory: interval 20 ms -> 80 ms (the interval given for it: every other "
                                         "source is at its longest); load: interval 10 ms -> 10 s: ")


@pytest.mark.parametrize("backend", ["native", "psutil"])
def test_relaxed_once_well_under_and_never_below_the_start(tmp_path, monkeypatch, backend):
    if backend == "native" and not native_available()[0]:
        pytest.skip("native backend unavailable here")
    # memory at 0.6 ms a read: 6 % -> memory 2 (3 %); then free: after 2 s under 2.5 %, back to 1, and no further
    tree = Tree("full", tmp_path) if backend == "native" else None
    s = budget_sampler(monkeypatch, backend, "memory=600000", tree, load=False)
    with s:
        wait_for(lambda: s.interval_changes, "no interval change")
        assert changes_of(s) == [("memory", 0.01, 0.02, False)]
        if backend == "native":
            s._impl._set_test_cost("memory", 0)
        else:
            s._impl._budget.test["memory"] = 0
        wait_for(lambda: len(s.interval_changes) >= 2, "not relaxed")
        relaxed = time.monotonic()
        wait_for(lambda: time.monotonic() - relaxed > 2.5, "")  # time for another relax, which must not come
    assert changes_of(s) == [("memory", 0.01, 0.02, False), ("memory", 0.02, 0.01, False)]
    assert s.intervals == {"cpu": 0.01, "memory": 0.01}
    assert ", under the budget of 5 %" in s.errors["budget"]


@needs_native
def test_the_gpu_reader_follows_a_stretched_gpu(fake, monkeypatch):
    """gpu at 40 ms a read (its reader's work): at 10 ms and 5 %, 128 rows (1.28 s) bring it to 0.31 ms per row. The
    reader then reads every 1.28 s too (its deadlines are absolute and none is made up: at most one reading per
    1.28 s, and one more), not every 10 ms; and every row has a valid reading (none older than 1.28 s + 0.25 s)."""
    fake()
    monkeypatch.setenv(B.TEST_COST_ENV, "gpu=40000000")
    s = sysprof.Sampler(backend="native", interval=0.01, budget=0.05, capacity=4096, **dict(OFF, memory=True),
                        gpu=True)
    assert s.intervals == {"memory": 0.01, "gpu": 0.01}
    with s:
        wait_for(lambda: s.interval_changes, "no interval change")
        s.drain()
        after = time.monotonic()
        wait_for(lambda: time.monotonic() - after > 4.0, "")
    assert changes_of(s) == [("gpu", 0.01, 1.28, False)]
    batch = s.drain()
    used = batch.column("gpu/0/memory_used_bytes")
    assert not np.isnan(used).any()
    reading = (used - 2**30) / MiB  # the fake's reading count (tests/fake_nvml)
    span = (int(batch.timestamps_ns[-1]) - int(batch.timestamps_ns[0])) / 1e9
    assert 0 <= reading[-1] - reading[0] <= span / 1.28 + 2, (reading[0], reading[-1], span)


def test_no_budget_no_change(monkeypatch):
    s = budget_sampler(monkeypatch, "psutil", "memory=2000000,load=400000", budget=None)
    with s:
        wait_for(lambda: not math.isnan(s.stats["cpu_percent"]), "no evaluation")
        wait_for(lambda: s.stats["cpu_seconds_total"] > 0, "no CPU counted")
    assert s.interval_changes == [] and "budget" not in s.errors
    assert s.intervals == {"cpu": 0.01, "memory": 0.01, "load": 0.01}


# --------------------------------------------------------------------------------------------------
# the threads' CPU in stats
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["native", "psutil"])
def test_stats_count_the_threads_cpu(backend):
    if backend == "native" and not native_available()[0]:
        pytest.skip("native backend unavailable here")
    s = sysprof.Sampler(backend=backend, interval=0.001, budget=None, **dict(OFF, cpu=True, memory=True))
    st = s.stats
    assert st["cpu_seconds_total"] == 0 and math.isnan(st["cpu_percent"])
    cpu0 = time.process_time()
    with s:
        wait_for(lambda: not math.isnan(s.stats["cpu_percent"]) and s.stats["taken"] >= 100, "no evaluation")
    used = time.process_time() - cpu0
    st = s.stats
    # counted at each evaluation and at stop: the threads' CPU is part of this process's, and not nothing
    assert 0 < st["cpu_seconds_total"] <= used, (st, used)
    assert 0 <= st["cpu_percent"] <= 100 * 2  # the sampling thread and at most one helper: two cores at most


# --------------------------------------------------------------------------------------------------
# the CLI and the trace
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["0", "150%", "abc"])
def test_cli_budget_errors(tmp_path, value):
    proc = run_cli("record", "-q", "-o", tmp_path / "t.json", "--budget", value, "-d", "0.1")
    assert_one_line_error(proc, rc=2)
    assert f"invalid budget '{value}'" in proc.stderr
    assert not (tmp_path / "t.json").exists()


def test_cli_budget_flag_parses():
    from sysprof.cli import build_parser

    p = build_parser()
    for cmd in ("record", "serve"):
        assert p.parse_args([cmd]).budget == "default"
        assert p.parse_args([cmd, "--budget", "2%"]).budget == 0.02
        assert p.parse_args([cmd, "--budget", "none"]).budget is None


def test_cli_record_writes_each_change(tmp_path):
    trace = tmp_path / "t.json"
    env = dict(os.environ, **{B.TEST_COST_ENV: "memory=2000000,load=400000"})
    proc = run_cli("record", "-o", trace, "-i", "10ms", "--cpu", "--memory", "--load", "--budget", "5%", "-d", "3",
                   env=env)
    assert proc.returncode == 0, proc.stderr
    assert ("sysprof: warning: budget: memory: interval 10 ms -> 160 ms; load: interval 10 ms -> 20 ms: sysprof's "
            "sampling threads at 24 % of a core") in proc.stderr
    events = json.loads(trace.read_text())
    start = event(events, "sysprof start")["args"]
    assert start["budget"] == 0.05 and start["intervals_s"] == {"cpu": 0.01, "memory": 0.01, "load": 0.01}
    stop = event(events, "sysprof stop")["args"]
    assert stop["intervals_s"] == pytest.approx(STRETCHED)
    assert [(c["source"], c["previous_s"], c["interval_s"], c["given"]) for c in stop["interval_changes"]] == \
        STRETCH_CHANGES
    assert stop["stats"]["budget_percent"] == 5.0 and stop["stats"]["cpu_seconds_total"] > 0
    instant = event(events, B.INTERVALS_EVENT)  # one decision: one instant, at its time
    assert instant["args"]["changes"] == stop["interval_changes"]
    assert instant["args"]["intervals_s"] == pytest.approx(STRETCHED)
    assert instant["ts"] == stop["interval_changes"][0]["time_ns"] // 1000
    report = run_cli("report", trace)
    assert report.returncode == 0, report.stderr
    line = next(ln for ln in report.stdout.splitlines() if ln.startswith("sysprof:"))
    assert line.startswith("sysprof:    sampling threads ") and "% of a core (budget 5 %)" in line
    assert line.endswith("; 2 interval changes by the budget, ending at memory 160 ms, load 20 ms"), line
    js = json.loads(run_cli("report", "--json", trace).stdout)
    assert js["budget_percent"] == 5.0 and len(js["interval_changes"]) == 2
    assert js["sysprof_cpu_percent"] == pytest.approx(100 * stop["stats"]["cpu_seconds_total"] / js["duration_s"])


def test_cli_record_without_budget(tmp_path):
    trace = tmp_path / "t.json"
    env = dict(os.environ, **{B.TEST_COST_ENV: "memory=2000000"})
    proc = run_cli("record", "-q", "-o", trace, "-i", "10ms", "--memory", "--budget", "none", "-d", "1", env=env)
    assert proc.returncode == 0, proc.stderr
    events = json.loads(trace.read_text())
    assert event(events, "sysprof start")["args"]["budget"] is None
    stop = event(events, "sysprof stop")["args"]
    assert stop["interval_changes"] == [] and stop["intervals_s"] == {"memory": 0.01}
    assert not [e for e in events if e.get("name") == B.INTERVALS_EVENT]
    report = run_cli("report", trace)
    assert "(no budget)" in report.stdout and "interval change" not in report.stdout


def test_recorder_writes_each_change(tmp_path, monkeypatch):
    from sysprof.integrations.recorder import Recorder

    monkeypatch.setenv(B.TEST_COST_ENV, "memory=2000000,load=400000")
    rec = Recorder(tmp_path / "run.json", interval=0.01, sources=["cpu", "memory", "load"], budget=0.05,
                   backend="psutil")
    assert rec.defaults == {"memory": 0.05}  # the recorder's default, not the user's: the budget's to stretch
    rec.start()
    wait_for(lambda: rec.sampler.interval_changes, "no interval change")
    rec.stop()
    events = json.loads(rec.path.read_text())
    assert event(events, "sysprof start")["args"]["budget"] == 0.05
    stop = event(events, "sysprof stop")["args"]
    # memory starts at the recorder's 50 ms (5 rows): 400 + 400 us = 8 %; memory 10 (200 us), then load 2 (200):
    # 400 us, 4 %
    assert [(c["source"], c["previous_s"], c["interval_s"]) for c in stop["interval_changes"]] == \
        [("memory", 0.05, 0.1), ("load", 0.01, 0.02)]
    assert event(events, B.INTERVALS_EVENT)["args"]["changes"] == stop["interval_changes"]


def test_change_events_group_by_time():
    class Fake:
        intervals = {"cpu": 0.02, "disk": 0.04}
        interval_changes = []

    f = Fake()
    from sysprof.pipeline.producers import IntervalChanges
    from sysprof.trace.events import chrome_events

    producer = IntervalChanges(f, 7)
    events = lambda: chrome_events(producer.take(None, None), lambda t: t // 1000)  # noqa: E731
    assert events() == []
    f.interval_changes = [dict(time_ns=5000, source="cpu", interval_s=0.02, previous_s=0.01, given=False,
                               cpu_percent=9.0),
                          dict(time_ns=5000, source="disk", interval_s=0.04, previous_s=0.01, given=True,
                               cpu_percent=9.0)]
    out = events()
    assert out == [{"name": "sysprof intervals", "ph": "i", "s": "g", "ts": 5, "pid": 7, "tid": 0,
                    "args": {"changes": f.interval_changes, "intervals_s": {"cpu": 0.02, "disk": 0.04}}}]
    assert events() == []  # each change once
    assert producer.stop_args() == {"interval_changes": f.interval_changes}
