"""Per-source intervals (``Sampler(intervals=...)``, ``--interval-<source>``): which rows read a source, which repeat
it, and ``stats["reads"]``.

The thread's ticks depend on the machine's load, so nothing here asserts a time or a count of ticks. What holds
regardless of load is checked instead:
- on a fixture tree (tests/fixtures/full) a slow source is read only by the first row after ``start()`` and by
  the row at ``stop()``, so every other row repeats the first one's exact values, and the count of reads says
  whether the last row was a read;
- on the live /proc the process source's CPU time grows between any two reads, so its runs of equal values in
  the rows are its reads, one for one; a run is never longer than the source's period (a missed deadline
  delays a read, never skips it), and exactly the period when no deadline was missed;
- the psutil backend's schedule is driven tick by tick, deterministically;
- with the fake NVML (tests/fake_nvml) a row's gpu memory_used_bytes names the reader's reading it holds.
"""
from __future__ import annotations

import json
import math
import os
import time

import numpy as np
import pytest

import sysprof
from sysprof.sampling.registry import SOURCES
from sysprof.sampling.sampler import native_available

from cli_support import assert_one_line_error, event, run_cli
from fake_nvml.support import MiB, fake, fake_builds  # noqa: F401 - fake_builds and fake are fixtures
from test_sampler_fixtures import OFF, Tree, nan

LOAD_V1 = (1.5, 0.75, 0.25, 2.0, 345.0)  # tests/fixtures/full/v1/proc/loadavg "1.50 0.75 0.25 2/345 6789"
LOAD_V2 = "3.00 2.00 1.00 5/400 7000\n"
LOAD_V2_VALUES = (3.0, 2.0, 1.0, 5.0, 400.0)
LOAD_V3 = "0.10 0.20 0.30 1/100 7100\n"
LOAD_V3_VALUES = (0.1, 0.2, 0.3, 1.0, 100.0)
LOAD = ("load/1m", "load/5m", "load/15m", "load/procs_running", "load/procs_total")
HOUR = 3600.0  # a slow source's interval: no tick of a test reaches it

needs_native = pytest.mark.skipif(not native_available()[0], reason="native backend unavailable here")
needs_live_native = pytest.mark.skipif(not (native_available()[0] and os.path.exists("/proc/self/stat")),
                                       reason="needs the native backend on a live /proc")


def fixture_sampler(tree, **kw):
    args = dict(OFF, backend="native", proc_root=tree.proc, sys_root=tree.sys, capacity=4096)
    args.update(kw)
    return sysprof.Sampler(**args)


def wait_taken(s, n, timeout=30.0):
    """Until the thread has taken at least n rows (a bound against a hang, not a timing assert)."""
    end = time.monotonic() + timeout
    while s.stats["taken"] < n:
        assert time.monotonic() < end, f"the thread took {s.stats['taken']} of {n} rows"
        time.sleep(0.001)


def runs(col):
    """Lengths of the runs of equal consecutive values (NaN equal to NaN)."""
    out = []
    for i, v in enumerate(col):
        same = i > 0 and (v == col[i - 1] or (math.isnan(v) and math.isnan(col[i - 1])))
        if same:
            out[-1] += 1
        else:
            out.append(1)
    return out


def load_rows(batch):
    return [tuple(float(batch.column(c)[i]) for c in LOAD) for i in range(len(batch))]


# --------------------------------------------------------------------------------------------------
# arguments
# --------------------------------------------------------------------------------------------------
@needs_native
def test_intervals_are_rounded_to_whole_intervals_and_listed_per_source(tmp_path):
    tree = Tree("full", tmp_path)
    s = fixture_sampler(tree, interval=0.003, cpu=True, load=True, memory=True, net=True,
                        intervals={"load": 0.01, "memory": 0.0105})
    # 0.01 / 0.003 = 3.33 -> 3 intervals; 0.0105 / 0.003 = 3.5 -> 4 (half up); net not named -> 1; cpu not named:
    # its default, max(interval, 1/USER_HZ) = 10 ms here (sysprof/sampling/default_intervals.py) -> 3 intervals
    assert os.sysconf("SC_CLK_TCK") == 100  # USER_HZ, as on nearly every distribution
    assert s.intervals == {"cpu": pytest.approx(0.009, rel=1e-12), "memory": pytest.approx(0.012, rel=1e-12),
                           "net": 0.003, "load": pytest.approx(0.009, rel=1e-12)}
    assert s.stats["reads"] == {"cpu": 0, "memory": 0, "net": 0, "load": 0}  # construction, sample(): not counted
    s.sample()
    assert s.stats["reads"] == {"cpu": 0, "memory": 0, "net": 0, "load": 0}
    assert fixture_sampler(tree, interval=0.001, load=True, intervals={"load": 0.001}).intervals == {"load": 0.001}
    assert fixture_sampler(tree, load=True, intervals=None).intervals == {"load": 0.001}
    # cpu: 10 ms by default at 1 ms, the interval where that is longer, and what is given where given
    assert fixture_sampler(tree, cpu=True).intervals == {"cpu": 0.01}
    assert fixture_sampler(tree, cpu=True, interval=0.02).intervals == {"cpu": 0.02}
    assert fixture_sampler(tree, cpu=True, intervals={"cpu": 0.001}).intervals == {"cpu": 0.001}
    # a library's defaults: where the user's intervals do not name the source
    assert fixture_sampler(tree, cpu=True, load=True, default_intervals={"cpu": 0.002, "load": 0.05, "net": 1.0},
                           intervals={"load": 0.004}).intervals == {"cpu": 0.002, "load": 0.004}


@pytest.mark.parametrize("backend", ["native", "psutil"])
def test_bad_intervals_are_value_errors(tmp_path, backend):
    if backend == "native" and not native_available()[0]:
        pytest.skip("native backend unavailable here")
    kw = dict(OFF, backend=backend, interval=0.01, cpu=True)
    with pytest.raises(ValueError, match="unknown source 'cpus'") as e:
        sysprof.Sampler(intervals={"cpus": 1.0}, **kw)
    assert "registered: " + ", ".join(SOURCES) in str(e.value)
    with pytest.raises(ValueError, match="source 'memory' is not sampled"):
        sysprof.Sampler(intervals={"memory": 1.0}, **kw)
    for bad in (0.005, 0.0, -1.0, math.nan, math.inf, 86401.0, True, "1s", None):
        with pytest.raises(ValueError, match=r"intervals\['cpu'\] must be a number of seconds in \[interval = 0.01"):
            sysprof.Sampler(intervals={"cpu": bad}, **kw)
    with pytest.raises(ValueError, match="intervals must be a mapping"):
        sysprof.Sampler(intervals=[("cpu", 1.0)], **kw)


@needs_native
def test_native_rejects_an_interval_for_a_source_it_does_not_sample():
    from sysprof import _native

    with pytest.raises(ValueError, match="source 'memory', which is not sampled"):
        _native.NativeSampler(interval_ns=1000000, capacity=16, sources=["cpu"], intervals_ns={"memory": 5000000})
    with pytest.raises(ValueError, match="shorter than the sampler's"):
        _native.NativeSampler(interval_ns=1000000, capacity=16, sources=["cpu"], intervals_ns={"cpu": 999999})


# --------------------------------------------------------------------------------------------------
# native: exact repeats on a fixture tree
# --------------------------------------------------------------------------------------------------
@needs_native
def test_sample_reads_every_source_whatever_its_interval(tmp_path):
    tree = Tree("full", tmp_path)
    s = fixture_sampler(tree, load=True, intervals={"load": HOUR})
    assert tuple(s.sample()[c] for c in LOAD) == LOAD_V1
    tree.write("loadavg", LOAD_V2)
    assert tuple(s.sample()[c] for c in LOAD) == LOAD_V2_VALUES


def check_run(rows, first, later, reads_in_run):
    """A run's load rows: the first reads `first`; every other but the last repeats it exactly; the last is a
    read of `later` exactly when the run read the source twice."""
    assert rows[0] == first
    assert all(r == first for r in rows[1:-1]), rows
    assert reads_in_run in (1, 2)
    if len(rows) > 1:
        assert rows[-1] == (later if reads_in_run == 2 else first)
    else:
        assert reads_in_run == 1


@needs_native
def test_slow_source_repeats_its_values_between_start_and_stop(tmp_path):
    tree = Tree("full", tmp_path)
    s = fixture_sampler(tree, memory=True, load=True, intervals={"load": HOUR})
    taken = 0
    for later, later_values, first in ((LOAD_V2, LOAD_V2_VALUES, LOAD_V1), (LOAD_V3, LOAD_V3_VALUES, LOAD_V2_VALUES)):
        reads_before = s.stats["reads"]["load"]
        s.start()
        wait_taken(s, taken + 1)  # the first row has read the file: it may change now
        tree.write("loadavg", later)
        wait_taken(s, taken + 20)
        s.stop()
        batch = s.drain()
        st = s.stats
        taken = st["taken"]
        # the first row after start() read the file as it was then; the others repeat it, but the row at stop()
        # (when there is one: none if a row was taken just before) reads every source
        check_run(load_rows(batch), first, later_values, st["reads"]["load"] - reads_before)
        assert st["reads"]["memory"] == taken  # at the sampler's interval: every row
    assert st["dropped"] == 0 and set(st["reads"]) == {"memory", "load"}


@needs_native
def test_nan_repeats_as_nan(tmp_path):
    tree = Tree("full", tmp_path)
    s = fixture_sampler(tree, memory=True, load=True, intervals={"load": HOUR})
    with s:
        wait_taken(s, 5)
    assert load_rows(s.drain())[0] == LOAD_V1
    tree.write("loadavg", "garbage\n")
    with s:
        wait_taken(s, s.stats["taken"] + 20)
    batch = s.drain()
    assert len(batch) >= 20
    for c in LOAD:  # read as garbage at start (and at stop): NaN in every row, never the old values
        for v in batch.column(c):
            nan(c, float(v))
    assert "load" in s.errors
    assert np.all(batch.column("memory/total_bytes") == 8000000 * 1024)  # the other source goes on
    tree.write("loadavg", "1.50 0.75 0.25 2/345 6789\n")
    with s:
        wait_taken(s, s.stats["taken"] + 1)
    assert load_rows(s.drain())[0] == LOAD_V1


# --------------------------------------------------------------------------------------------------
# the schedule on the live /proc: each read of the process source gives a new CPU time
# --------------------------------------------------------------------------------------------------
def check_schedule(s, k, n_rows):
    """Runs the thread for at least n_rows more rows, then checks the process source's reads in that run against
    its period k; returns the stats."""
    st0 = s.stats
    with s:
        wait_taken(s, st0["taken"] + n_rows)
    st, batch = s.stats, s.drain()
    n = len(batch)
    assert n == st["taken"] - st0["taken"] and st["dropped"] == 0
    col = batch.column("process/cpu_seconds_total")
    assert not np.isnan(col).any()
    assert np.all(np.diff(col) >= 0)  # CPU time: repeats (0) and reads (> 0)
    lengths = runs(col)
    assert st["reads"]["process"] - st0["reads"]["process"] == len(lengths)  # one run of equal values per read
    assert st["reads"]["cpu"] - st0["reads"]["cpu"] == n  # every row reads the source at the sampler's interval
    assert max(lengths) <= k, lengths  # each row is at least one tick on: never more than k rows between reads
    missed = st["missed_deadlines"] - st0["missed_deadlines"]
    # regular rows are ticks 0 .. n-1+missed at most; one read per multiple of k, and maybe the row at stop
    assert len(lengths) <= (n - 1 + missed) // k + 2
    if missed == 0:  # row i is tick i: reads at rows 0, k, 2k, ..., and maybe the row at stop
        assert all(n_ == k for n_ in lengths[:-2]), lengths
        assert len(lengths) in (-(-n // k), -(-(n - 1) // k) + 1), (n, lengths)
    return st


@needs_live_native
def test_native_schedule_reads_a_source_every_k_ticks():
    s = sysprof.Sampler(backend="native", interval=0.002, **dict(OFF, cpu=True, process=True),
                        intervals={"process": 0.01, "cpu": 0.002}, capacity=4096)
    assert s.intervals == {"cpu": 0.002, "process": 0.01}
    check_schedule(s, 5, 100)
    check_schedule(s, 5, 50)  # a second run starts its grid again: its first row reads


def test_psutil_schedule_reads_a_source_every_k_ticks():
    s = sysprof.Sampler(backend="psutil", interval=0.005, **dict(OFF, cpu=True, process=True),
                        intervals={"process": 0.02, "cpu": 0.005}, capacity=4096)
    assert s.intervals == {"cpu": 0.005, "process": 0.02}
    check_schedule(s, 4, 40)


def test_psutil_schedule_tick_by_tick():
    """The grid, deterministically: the source of period 4 is read at the first tick at or after each multiple of 4;
    a not-due source's slice is the previous row's, exactly; tick 0 (a new run) and None (stop, sample()) read all."""
    s = sysprof.Sampler(backend="psutil", interval=0.001, **dict(OFF, cpu=True, load=True),
                        intervals={"load": 0.004, "cpu": 0.001})
    impl = s._impl
    cpu_w = sum(1 for c in s.channels if c.startswith("cpu/"))
    width = len(s.channels)
    prev = np.arange(width, dtype=np.float64) + 1000.0  # no real value

    def read_at(ticks):
        out = []
        for tick in ticks:
            before = impl.stats["reads"]["load"]
            row = impl._row(impl._readers, time.monotonic_ns(), tick, prev)
            if impl.stats["reads"]["load"] > before:
                out.append(tick)
                assert not np.array_equal(row[cpu_w:], prev[cpu_w:])
            else:
                assert np.array_equal(row[cpu_w:], prev[cpu_w:])  # the load slice repeats exactly
            assert not np.array_equal(row[:cpu_w], prev[:cpu_w])  # cpu (period 1) is read at every tick
        return out

    # 8 was missed: read at 9; 16 at 17; 20..28 at 30, and 32 on the grid again
    assert read_at((0, 1, 2, 3, 4, 5, 7, 9, 10, 11, 12, 13, 17, 18, 30, 31, 32)) == [0, 4, 9, 12, 17, 30, 32]
    # rows at odd ticks only: read at the first after each multiple of 4 (a tick % 4 == 0 rule would starve it)
    assert read_at((33, 35, 37, 39, 41, 43, 45)) == [37, 41, 45]
    before = impl.stats["reads"]["load"]
    impl._row(impl._readers, 0, 0, prev)  # a new run: tick 0 reads everything, and the grid starts again
    impl._row(impl._readers, 0, 1, prev)
    impl._row(impl._readers, 0, None, prev)  # the row at stop
    assert impl.stats["reads"]["load"] == before + 2
    reads = dict(impl.stats["reads"])
    s.sample()  # sample() reads every source, and is not counted
    assert impl.stats["reads"] == reads


# --------------------------------------------------------------------------------------------------
# gpu: its slice is copied from the reader's latest reading only when due
# --------------------------------------------------------------------------------------------------
@needs_native
def test_gpu_interval_native(fake):
    fake()
    s = sysprof.Sampler(backend="native", interval=0.001, **dict(OFF, cpu=True), gpu=True,
                        intervals={"gpu": 0.01, "cpu": 0.001})
    assert s.intervals == {"cpu": 0.001, "gpu": 0.01}
    with s:
        wait_taken(s, 100)
    st, batch = s.stats, s.drain()
    n = len(batch)
    assert n == st["taken"] and st["reads"]["cpu"] == n
    # memory_used_bytes is 1 GiB + (the fake's reading count) MiB: which reading of the reader a row holds
    reading = (batch.column("gpu/0/memory_used_bytes") - 2**30) / MiB
    assert not np.isnan(reading).any() and np.all(np.diff(reading) >= 0)
    assert len(runs(reading)) <= st["reads"]["gpu"] <= (n - 1 + st["missed_deadlines"]) // 10 + 2
    if st["missed_deadlines"] == 0:  # row i is tick i: a new reading only at rows 0, 10, 20, ... and at stop
        changed = [i for i in range(1, n) if reading[i] != reading[i - 1]]
        assert all(i % 10 == 0 or i == n - 1 for i in changed), changed


# --------------------------------------------------------------------------------------------------
# the CLI: --interval-<source>, one per registry source
# --------------------------------------------------------------------------------------------------
def test_cli_has_an_interval_flag_per_registry_source():
    from sysprof.cli import build_parser
    from sysprof.cli.sources import intervals_from_args, interval_flag, _sources_from_args

    parser = build_parser()
    assert interval_flag(SOURCES["process_tree"]) == "--interval-process-tree"
    for spec in SOURCES.values():
        args = parser.parse_args(["record", spec.flag, "-i", "2ms", interval_flag(spec), "500ms"])
        assert intervals_from_args(args, _sources_from_args(args, have_target=True)) == {spec.name: 0.5}
    args = parser.parse_args(["record", "--interval-cpu", "10ms", "--interval-memory", "1s"])  # the default set
    assert intervals_from_args(args, _sources_from_args(args, have_target=False)) == {"cpu": 0.01, "memory": 1.0}
    assert intervals_from_args(parser.parse_args(["record"]), {"cpu": True}) == {}


def test_cli_record_with_a_source_interval(tmp_path):
    trace = tmp_path / "t.json"
    proc = run_cli("record", "-q", "-o", trace, "-i", "2ms", "--cpu", "--memory", "--load", "--interval-load", "1h",
                   "-d", "0.2")
    assert proc.returncode == 0, proc.stderr
    events = json.loads(trace.read_text())
    # cpu at its default (10 ms: /proc/stat's USER_HZ ticks), memory at -i, load as given
    assert event(events, "sysprof start")["args"]["intervals_s"] == {"cpu": 0.01, "memory": 0.002, "load": 3600.0}
    st = event(events, "sysprof stop")["args"]["stats"]
    assert st["reads"]["memory"] == st["taken"] and st["reads"]["load"] in (1, 2)  # at start, and maybe at stop
    assert st["reads"]["cpu"] <= (st["taken"] + st["missed_deadlines"] - 1) // 5 + 2  # every 5th tick, and at stop


@pytest.mark.parametrize("argv,message", [
    (["--interval-gpu", "10ms"], "sysprof: --interval-gpu is given but --gpu is not recorded"),
    (["-i", "10ms", "--interval-cpu", "1ms"], "sysprof: --interval-cpu 0.001 s is shorter than --interval 0.01 s"),
    (["--interval-cpu", "soon"], "invalid time 'soon'"),
])
def test_cli_interval_errors(tmp_path, argv, message):
    proc = run_cli("record", "-q", "-o", tmp_path / "t.json", *argv, "-d", "0.1")
    assert_one_line_error(proc, rc=2)
    assert message in proc.stderr
    assert not (tmp_path / "t.json").exists()
