"""Exact-value tests of the native pressure (PSI) and cgroup v2 sources, plus live checks.

Same method as tests/test_sampler_fixtures.py (whose helpers are reused): a fixture tree's v1 is the
construction read, v2, v3, ... are written over it in place, and rates are checked against the
monotonic time measured around the reads. Formats, from the kernel documentation:

- /proc/pressure/<resource> (Documentation/accounting/psi.rst):
  ``some avg10=A avg60=B avg300=C total=T`` and ``full ...``; avgN are percents, T is cumulative
  stall time in microseconds. cpu's ``full`` line exists only since 5.13.
- cgroup v2 (Documentation/admin-guide/cgroup-v2.rst): memory.current, memory.max ("max" = no limit),
  memory.stat and cpu.stat ("flat keyed", any order), cpu.max (``$MAX $PERIOD``, microseconds),
  io.stat ("nested keyed", one ``MAJ:MIN rbytes=.. wbytes=.. ...`` line per device).
"""

import math
import os
import time
from pathlib import Path

import numpy as np
import pytest

import sysprof
from test_sampler_fixtures import FIXTURES, OFF, Tree, check_rate, exact, nan, open_sampler, take

KINDS = ("some", "full")
FIELDS = ("avg10_percent", "avg60_percent", "avg300_percent", "seconds_total", "seconds_per_second")
CGROUP_CHANNELS = (
    "cgroup/memory_current_bytes",
    "cgroup/memory_max_bytes",
    "cgroup/memory_anon_bytes",
    "cgroup/memory_file_bytes",
    "cgroup/cpu_usage_seconds_total",
    "cgroup/cpu_user_seconds_total",
    "cgroup/cpu_system_seconds_total",
    "cgroup/cpu_percent",
    "cgroup/cpu_throttled_seconds_total",
    "cgroup/cpu_throttled_periods_total",
    "cgroup/cpu_periods_total",
    "cgroup/cpu_limit_cores",
    "cgroup/io_read_bytes",
    "cgroup/io_write_bytes",
    "cgroup/io_read_bytes_per_second",
    "cgroup/io_write_bytes_per_second",
)
INF = math.inf


def psi_channels(resource):
    return [f"pressure/{resource}/{k}_{f}" for k in KINDS for f in FIELDS]


class SysTree(Tree):
    """Tree whose versions may also change files under sys/ (the cgroup files)."""

    def apply(self, version, skip=()):
        for top in ("proc", "sys"):
            src = FIXTURES / self.name / version / top
            for p in sorted(q for q in src.rglob("*") if q.is_file()):
                dst = self.root / top / p.relative_to(src)
                with open(dst, "r+b") as f:  # in place: the sampler keeps the file open
                    f.write(p.read_bytes())
                    f.truncate()

    def remove_sys(self, rel):
        (self.root / "sys" / rel).unlink()


def check_psi(row, resource, kind, avg, total_us):
    pre = f"pressure/{resource}/{kind}_"
    for f, want in zip(FIELDS[:3], avg):
        exact(pre + f, row[pre + f], want)
    exact(pre + "seconds_total", row[pre + "seconds_total"], total_us / 1e6)


# --------------------------------------------------------------------------------------------------
# pressure
# --------------------------------------------------------------------------------------------------
def test_pressure_all_resources(tmp_path):
    tree = Tree("pressure_full", tmp_path)
    s, built = open_sampler(tree, pressure=True)
    assert "pressure" not in s.errors, s.errors
    assert list(s.channels) == psi_channels("cpu") + psi_channels("memory") + psi_channels("io")

    row, now = take(s)  # v1 again: nothing moved, every rate is exactly 0
    check_psi(row, "cpu", "some", (1.50, 0.75, 0.25), 1000000)
    check_psi(row, "cpu", "full", (0.0, 0.0, 0.0), 0)
    check_psi(row, "memory", "some", (0.10, 0.02, 0.0), 123456789)
    check_psi(row, "memory", "full", (0.05, 0.01, 0.0), 4000000000)
    check_psi(row, "io", "some", (12.34, 5.67, 1.23), 987654321000)
    check_psi(row, "io", "full", (10.00, 4.00, 1.00), 500000000000)
    for c in s.channels:
        if c.endswith("_per_second"):
            check_rate(c, row[c], 0, built, now)

    tree.apply("v2")
    prev = now
    row, now = take(s)
    check_psi(row, "cpu", "some", (2.72, 1.00, 0.31), 1004000)
    check_psi(row, "memory", "some", (0.20, 0.05, 0.01), 123556789)
    # memory full went 4e9 -> 3e9 us: a reset, not a 32-bit wrap: total follows, rate is 0
    check_psi(row, "memory", "full", (0.04, 0.01, 0.0), 3000000000)
    check_psi(row, "io", "some", (99.99, 50.00, 20.00), 987654821000)
    check_psi(row, "io", "full", (100.00, 45.50, 18.25), 500000250000)
    # stall seconds per wall second: Δtotal µs / 1e6 / Δt, a share of wall time, so capped at 1 (these
    # synthetic deltas exceed the ~20 ms between reads). The reads are >= 20 ms apart (GAP), so the
    # trailing window is exactly the last interval.
    check_rate("cpu some", row["pressure/cpu/some_seconds_per_second"], 4000 / 1e6, prev, now, cap=1.0)  # +4000 µs
    check_rate("cpu full", row["pressure/cpu/full_seconds_per_second"], 0, prev, now, cap=1.0)
    check_rate("memory some", row["pressure/memory/some_seconds_per_second"], 100000 / 1e6, prev, now, cap=1.0)
    check_rate("memory full", row["pressure/memory/full_seconds_per_second"], 0, prev, now, cap=1.0)
    check_rate("io some", row["pressure/io/some_seconds_per_second"], 500000 / 1e6, prev, now, cap=1.0)
    check_rate("io full", row["pressure/io/full_seconds_per_second"], 250000 / 1e6, prev, now, cap=1.0)


def test_pressure_partial_no_cpu_full_and_io_missing(tmp_path):
    # cpu without a full line (kernel < 5.13): its full channels exist and read NaN. No io file:
    # io's channels are left out and errors says why; cpu and memory go on.
    tree = Tree("pressure_partial", tmp_path)
    s, built = open_sampler(tree, pressure=True)
    assert list(s.channels) == psi_channels("cpu") + psi_channels("memory")
    err = s.errors["pressure"]
    assert "pressure/io" in err and "No such file" in err and "PSI" in err
    assert "pressure/cpu" not in err and "pressure/memory" not in err

    tree.apply("v2")
    row, now = take(s)
    check_psi(row, "cpu", "some", (0.40, 0.08, 0.02), 20000)
    check_rate("cpu some", row["pressure/cpu/some_seconds_per_second"], 20000 / 1e6, built, now)
    for f in FIELDS:
        nan(f"cpu full {f}", row[f"pressure/cpu/full_{f}"])
    check_psi(row, "memory", "some", (0.0, 0.0, 0.0), 100)
    check_psi(row, "memory", "full", (0.0, 0.0, 0.0), 50)
    check_rate("memory some", row["pressure/memory/some_seconds_per_second"], 0, built, now)


def test_pressure_absent_disables_source(tmp_path):
    tree = Tree("pressure_partial", tmp_path)
    tree.remove("pressure/cpu")
    tree.remove("pressure/memory")
    s, _ = open_sampler(tree, pressure=True, load=False)
    assert not any(c.startswith("pressure/") for c in s.channels)
    err = s.errors["pressure"]
    assert all(f"pressure/{r}" in err for r in ("cpu", "memory", "io")), err


def test_pressure_malformed_file_leaves_out_that_resource(tmp_path):
    tree = Tree("pressure_partial", tmp_path)
    tree.write("pressure/memory", "some avg10=x avg60=0.00 avg300=0.00 total=1\n")
    s, _ = open_sampler(tree, pressure=True)
    assert list(s.channels) == psi_channels("cpu")
    err = s.errors["pressure"]
    assert "pressure/memory: malformed" in err and "some avg10=x" in err
    memory_part = next(e for e in err.split("; ") if "pressure/memory" in e)
    assert "no PSI" not in memory_part  # the file was there: no PSI hint for it


# --------------------------------------------------------------------------------------------------
# cgroup
# --------------------------------------------------------------------------------------------------
def test_cgroup_v2_values_and_rates(tmp_path):
    tree = SysTree("cgroup_v2", tmp_path)
    s, built = open_sampler(tree, cgroup=True)
    assert "cgroup" not in s.errors, s.errors
    assert s.channels == CGROUP_CHANNELS

    row, now = take(s)
    exact("memory_current", row["cgroup/memory_current_bytes"], 1073741824)
    exact("memory_max", row["cgroup/memory_max_bytes"], INF)  # "max"
    # memory.stat keys are looked up by name: anon_thp, file_mapped around them are not them
    exact("anon", row["cgroup/memory_anon_bytes"], 536870912)
    exact("file", row["cgroup/memory_file_bytes"], 268435456)
    exact("usage", row["cgroup/cpu_usage_seconds_total"], 5.0)  # 5000000 µs
    exact("user", row["cgroup/cpu_user_seconds_total"], 4.0)
    exact("system", row["cgroup/cpu_system_seconds_total"], 1.0)
    exact("throttled s", row["cgroup/cpu_throttled_seconds_total"], 0.45)  # 450000 µs
    exact("throttled periods", row["cgroup/cpu_throttled_periods_total"], 30)
    exact("periods", row["cgroup/cpu_periods_total"], 1200)
    exact("limit", row["cgroup/cpu_limit_cores"], 2.0)  # 200000 / 100000
    exact("io read", row["cgroup/io_read_bytes"], 3145728)  # 1048576 + 2097152 over 8:0 and 259:0
    exact("io write", row["cgroup/io_write_bytes"], 12288)  # 4096 + 8192
    check_rate("cpu_percent", row["cgroup/cpu_percent"], 0, built, now)
    check_rate("io read/s", row["cgroup/io_read_bytes_per_second"], 0, built, now)
    check_rate("io write/s", row["cgroup/io_write_bytes_per_second"], 0, built, now)

    tree.apply("v2")
    prev = now
    row, now = take(s)
    exact("memory_current", row["cgroup/memory_current_bytes"], 1073745920)
    exact("memory_max", row["cgroup/memory_max_bytes"], 2147483648)
    exact("anon", row["cgroup/memory_anon_bytes"], 536875008)
    exact("usage", row["cgroup/cpu_usage_seconds_total"], 5.25)
    exact("user", row["cgroup/cpu_user_seconds_total"], 4.2)
    exact("system", row["cgroup/cpu_system_seconds_total"], 1.05)
    exact("throttled s", row["cgroup/cpu_throttled_seconds_total"], 0.46)
    exact("throttled periods", row["cgroup/cpu_throttled_periods_total"], 31)
    exact("periods", row["cgroup/cpu_periods_total"], 1210)
    exact("limit", row["cgroup/cpu_limit_cores"], INF)  # "max 100000"
    exact("io read", row["cgroup/io_read_bytes"], 3149824)  # 1052672 + 2097152
    exact("io write", row["cgroup/io_write_bytes"], 20480)  # 4096 + 16384
    # percent of one core: 100 * 0.25 s of usage per elapsed second
    check_rate("cpu_percent", row["cgroup/cpu_percent"], 100 * 0.25, prev, now)
    check_rate("io read/s", row["cgroup/io_read_bytes_per_second"], 4096, prev, now)
    check_rate("io write/s", row["cgroup/io_write_bytes_per_second"], 8192, prev, now)

    tree.apply("v3")  # device 259:0 leaves io.stat: the sums drop, which is no negative rate
    prev = now
    row, now = take(s)
    exact("io read", row["cgroup/io_read_bytes"], 1052672)
    exact("io write", row["cgroup/io_write_bytes"], 4096)
    check_rate("io read/s", row["cgroup/io_read_bytes_per_second"], 0, prev, now)
    check_rate("io write/s", row["cgroup/io_write_bytes_per_second"], 0, prev, now)
    check_rate("cpu_percent", row["cgroup/cpu_percent"], 0, prev, now)


def test_cgroup_missing_controller_files_are_left_out(tmp_path):
    tree = SysTree("cgroup_v2", tmp_path)
    job = "fs/cgroup/train.slice/job/"
    tree.remove_sys(job + "cpu.max")  # cpu controller not enabled for the cgroup
    tree.remove_sys(job + "io.stat")  # io controller not enabled
    s, _ = open_sampler(tree, cgroup=True)
    gone = {"cgroup/cpu_limit_cores", "cgroup/io_read_bytes", "cgroup/io_write_bytes",
            "cgroup/io_read_bytes_per_second", "cgroup/io_write_bytes_per_second"}
    assert s.channels == tuple(c for c in CGROUP_CHANNELS if c not in gone)
    err = s.errors["cgroup"]
    assert "cpu.max" in err and "io.stat" in err and "memory.current" not in err
    row, _ = take(s)
    assert not any(math.isnan(v) for v in row.values() if v is not None), row
    exact("memory_current", row["cgroup/memory_current_bytes"], 1073741824)


def test_cgroup_of_pid(tmp_path):
    # pid=4242 lives in /train.slice/job too: its cgroup file, not self's, names the directory.
    tree = SysTree("cgroup_v2", tmp_path)
    (tree.root / "proc" / "self" / "cgroup").write_text("0::/elsewhere\n")
    (tree.root / "proc" / "4242").mkdir()
    (tree.root / "proc" / "4242" / "cgroup").write_text("0::/train.slice/job\n")
    s, _ = open_sampler(tree, cgroup=True, pid=4242)
    assert s.channels == CGROUP_CHANNELS and "cgroup" not in s.errors
    s2, _ = open_sampler(tree, cgroup=True)
    assert s2.channels == () and "/elsewhere" in s2.errors["cgroup"]


def test_cgroup_v1_is_disabled(tmp_path):
    tree = SysTree("cgroup_v1", tmp_path)  # only "N:controller:/x" lines, no "0::"
    tree.write("loadavg", "0.50 0.25 0.10 2/300 4242\n")
    s, _ = open_sampler(tree, cgroup=True, load=True)
    assert not any(c.startswith("cgroup/") for c in s.channels)
    assert s.errors["cgroup"].startswith("cgroup v1 is not supported")
    assert "load" not in s.errors and "load/1m" in s.channels  # the other sources go on


def test_cgroup_hybrid_reads_unified_root(tmp_path):
    # systemd's hybrid layout: v1 controllers, the v2 tree at fs/cgroup/unified with only core
    # files. "0::/" is its root: cpu.stat without the cpu controller has no throttling keys.
    tree = SysTree("cgroup_hybrid", tmp_path)
    s, built = open_sampler(tree, cgroup=True)
    assert s.channels == ("cgroup/cpu_usage_seconds_total", "cgroup/cpu_user_seconds_total",
                          "cgroup/cpu_system_seconds_total", "cgroup/cpu_percent")
    err = s.errors["cgroup"]
    assert err.startswith(tree.sys + "/fs/cgroup/unified/: "), err  # the directory, named once
    assert "memory.current: No such file" in err and "cpu.stat: no throttling" in err
    row, now = take(s)
    exact("usage", row["cgroup/cpu_usage_seconds_total"], 2.0)
    exact("user", row["cgroup/cpu_user_seconds_total"], 1.5)
    exact("system", row["cgroup/cpu_system_seconds_total"], 0.5)
    check_rate("cpu_percent", row["cgroup/cpu_percent"], 0, built, now)


def test_threaded_path_pressure_and_cgroup(tmp_path):
    # sample() uses a clone of the sources; the thread uses the originals. Both must agree.
    tree = SysTree("cgroup_v2", tmp_path)
    for rel in ("pressure/cpu", "pressure/memory", "pressure/io"):
        tree.write(rel, (FIXTURES / "pressure_full" / "v1" / "proc" / rel).read_bytes())
    w_before = time.time_ns()
    s, _ = open_sampler(tree, pressure=True, cgroup=True)  # primes the trailing windows' history
    w_after = time.time_ns()
    assert s.errors == {}
    with s:  # until rows past the window exist, however late the thread runs on a busy machine
        deadline = time.monotonic() + 30
        while (s.stats["taken"] < 3 or time.time_ns() < w_after + 60_000_000) and time.monotonic() < deadline:
            time.sleep(0.01)
    b = s.drain()
    assert len(b) >= 3
    assert (b.column("cgroup/memory_current_bytes") == 1073741824).all()
    assert (b.column("cgroup/cpu_limit_cores") == 2.0).all()
    assert (b.column("pressure/io/full_seconds_total") == 500000.0).all()
    # NaN while the history (from the priming read at construction) is shorter than the 20 ms trailing
    # window, then 0 (the file does not move)
    r = b.column("pressure/cpu/some_seconds_per_second")
    ts = b.timestamps_ns
    assert np.isnan(r[ts < w_before + 15_000_000]).all()
    late = ts >= w_after + 25_000_000
    assert late.any() and (r[late] == 0.0).all()


def test_psutil_backend_says_native_only():
    s = sysprof.Sampler(backend="psutil", cpu=False, memory=False, disk=False, net=False,
                        pressure=True, cgroup=True)
    assert s.errors["pressure"] == "only on the native backend"
    assert s.errors["cgroup"] == "only on the native backend"
    assert s.channels == ()


# --------------------------------------------------------------------------------------------------
# live
# --------------------------------------------------------------------------------------------------
def _own_cgroup_dir():
    """This process's cgroup v2 directory, found the way the sampler does (None if v1 only)."""
    with open("/proc/self/cgroup") as f:
        rel = next((line[3:].rstrip("\n") for line in f if line.startswith("0::")), None)
    if rel is None:
        return None
    mount = Path("/sys/fs/cgroup")
    if not (mount / "cgroup.controllers").exists() and (mount / "unified" / "cgroup.controllers").exists():
        mount = mount / "unified"
    return mount / rel.lstrip("/")


LIVE = dict(OFF, backend="native")


@pytest.mark.skipif(not os.path.exists("/proc/pressure/cpu"), reason="no PSI on this kernel")
def test_live_pressure_totals_monotone():
    s = sysprof.Sampler(pressure=True, **LIVE)
    assert any(c.startswith("pressure/cpu/") for c in s.channels), s.errors
    totals = [c for c in s.channels if c.endswith("_seconds_total")]
    prev = s.sample()
    t0 = time.monotonic()
    for _ in range(20):
        time.sleep(0.005)
        row = s.sample()
        for c in totals:
            if not math.isnan(prev[c]):
                assert row[c] >= prev[c], (c, prev[c], row[c])
                r = row[c.replace("_total", "_per_second")]
                if time.monotonic() - t0 > 0.03:  # the 20 ms trailing window is filled
                    assert 0 <= r <= 1, (c, r)
        prev = row


def test_live_cgroup_against_files():
    d = _own_cgroup_dir()
    if d is None:
        pytest.skip("cgroup v1 only")
    s = sysprof.Sampler(cgroup=True, **LIVE)
    checked = 0
    if (d / "memory.current").exists():
        before = int((d / "memory.current").read_text())
        v = s.sample()["cgroup/memory_current_bytes"]
        after = int((d / "memory.current").read_text())
        assert min(before, after) - 4e6 <= v <= max(before, after) + 4e6, (before, v, after)
        checked += 1
    if (d / "cpu.stat").exists():
        usage = lambda: int((d / "cpu.stat").read_text().split("usage_usec ")[1].split()[0]) / 1e6  # noqa: E731
        before = usage()
        v = s.sample()["cgroup/cpu_usage_seconds_total"]
        after = usage()
        assert before <= v <= after, (before, v, after)
        checked += 1
    if not checked:
        pytest.skip(f"neither memory.current nor cpu.stat in {d}")


def test_cli_flags_and_all():
    from sysprof.cli import _sources_from_args, build_parser

    args = build_parser().parse_args(["record", "--pressure", "--cgroup"])
    chosen = _sources_from_args(args, have_target=False)
    assert chosen["pressure"] and chosen["cgroup"] and not chosen["cpu"]
    chosen = _sources_from_args(build_parser().parse_args(["record", "--all"]), have_target=False)
    assert chosen["pressure"] and chosen["cgroup"]
    chosen = _sources_from_args(build_parser().parse_args(["record"]), have_target=False)
    assert not chosen["pressure"] and not chosen["cgroup"]  # not in the default set


def test_live_cgroup_cpu_percent_within_the_machine():
    # usage_usec advances at the scheduler tick: read every 1 ms it would give 0 % then 400 %+ rows.
    # Over the 20 ms trailing window it stays within what the CPUs can do, and over the run its rows' mean is the
    # increase of usage_usec that this test reads itself around the run (no rate asserted: however busy the
    # machine, the two measure the same CPU time).
    s = sysprof.Sampler(interval=0.001, cgroup=True, **LIVE)
    if "cgroup/cpu_percent" not in s.channels:
        pytest.skip(f"no cgroup v2 cpu.stat here: {s.errors.get('cgroup')}")
    stat = _own_cgroup_dir() / "cpu.stat"

    def usage_s():
        with open(stat) as f:
            return next(int(line.split()[1]) for line in f if line.startswith("usage_usec ")) / 1e6

    u0, t0 = usage_s(), time.time_ns()
    with s:
        while s.stats["taken"] < 300 and time.time_ns() - t0 < 120e9:  # rows, not time: the machine may be busy
            pass
    u1, t1 = usage_s(), time.time_ns()
    b = s.drain()
    v = b.column("cgroup/cpu_percent")
    assert v[~np.isnan(v)].max() <= 100 * (os.cpu_count() or 1) * 1.2
    # the rows' time-weighted mean (the trailing window covers the time before each row) against the independent
    # reading; the edges (start-up, the reads around it) are a few ms of a run of hundreds
    ok = ~np.isnan(v[1:])
    dt = np.diff(b.timestamps_ns)[ok] / 1e9
    mean = float((v[1:][ok] * dt).sum() / dt.sum())
    expected = 100 * (u1 - u0) / ((t1 - t0) / 1e9)
    assert mean == pytest.approx(expected, rel=0.25, abs=10), (mean, expected)


# --------------------------------------------------------------------------------------------------
# out-of-range file contents: every value finite and in its physical range, or NaN
# --------------------------------------------------------------------------------------------------
U64 = 2**64 - 1


def test_pressure_out_of_range_values(tmp_path):
    # only proc/pressure/cpu. v1: some avg10=250.00 and avg300=100.01 are not percents (NaN), avg60=100.00
    # is; total=2^63-1 µs. v2: some +10^12 µs (across 2^63: a signed window overflowed to -3.6e14),
    # full 0 -> 2^64-1: shares of wall time, capped at exactly 1. v3: some back to 5: a reset, 0.
    tree = Tree("pressure_ranges", tmp_path)
    s, _ = open_sampler(tree, pressure=True)
    assert list(s.channels) == psi_channels("cpu")
    row, _ = take(s)
    nan("cpu some avg10", row["pressure/cpu/some_avg10_percent"])
    exact("cpu some avg60", row["pressure/cpu/some_avg60_percent"], 100.0)
    nan("cpu some avg300", row["pressure/cpu/some_avg300_percent"])
    exact("cpu some total", row["pressure/cpu/some_seconds_total"], (2**63 - 1) / 1e6)
    assert row["pressure/cpu/some_seconds_per_second"] == 0.0
    assert row["pressure/cpu/full_seconds_per_second"] == 0.0
    tree.apply("v2")
    row, _ = take(s)
    check_psi(row, "cpu", "some", (1.0, 2.0, 3.0), 9223373036854775807)
    exact("cpu full total", row["pressure/cpu/full_seconds_total"], U64 / 1e6)
    assert row["pressure/cpu/some_seconds_per_second"] == 1.0, row["pressure/cpu/some_seconds_per_second"]
    assert row["pressure/cpu/full_seconds_per_second"] == 1.0, row["pressure/cpu/full_seconds_per_second"]
    tree.apply("v3")
    row, _ = take(s)
    assert row["pressure/cpu/some_seconds_per_second"] == 0.0
    assert row["pressure/cpu/full_seconds_per_second"] == 0.0  # unchanged at 2^64-1
    exact("cpu some total", row["pressure/cpu/some_seconds_total"], 5 / 1e6)


def test_cgroup_out_of_range_values(tmp_path):
    # 64 online CPUs, but cpuset.cpus.effective "0-1,5" gives the cgroup 3. io.stat's rbytes are
    # 2^64-1 on both devices: the sum saturates at 2^64-1, never wraps to 2^64-2.
    tree = SysTree("cgroup_ranges", tmp_path)
    s, _ = open_sampler(tree, cgroup=True)
    assert "cgroup/cpu_percent" in s.channels and "cgroup/memory_current_bytes" in s.channels
    row, _ = take(s)
    exact("memory_current", row["cgroup/memory_current_bytes"], 4096)
    exact("memory_max", row["cgroup/memory_max_bytes"], INF)  # "max": no limit, the documented +inf
    exact("usage", row["cgroup/cpu_usage_seconds_total"], (2**63 - 1) / 1e6)
    assert row["cgroup/cpu_percent"] == 0.0
    exact("io read", row["cgroup/io_read_bytes"], float(U64))
    exact("io write", row["cgroup/io_write_bytes"], 3)
    exact("limit", row["cgroup/cpu_limit_cores"], INF)  # "max 100000"
    # v2: usage +10^12 µs across 2^63 (a signed window overflowed): bounded by the 3 CPUs, exactly
    # 300 %. memory.current and cpu.max's quota of 400 digits: malformed, NaN, never inf.
    tree.apply("v2")
    row, _ = take(s)
    assert row["cgroup/cpu_percent"] == 300.0, row["cgroup/cpu_percent"]
    exact("usage", row["cgroup/cpu_usage_seconds_total"], 9223373036854775807 / 1e6)
    nan("memory_current", row["cgroup/memory_current_bytes"])
    nan("limit", row["cgroup/cpu_limit_cores"])
    err = s.errors["cgroup"]
    assert "memory.current: malformed" in err and "cpu.max: malformed" in err, err
    assert row["cgroup/io_read_bytes_per_second"] == 0.0
    exact("anon", row["cgroup/memory_anon_bytes"], 4096)  # the other files go on


def test_cgroup_memory_current_of_max_is_malformed(tmp_path):
    # "max" means "no limit" in memory.max only; a memory.current reading "max" is corrupt: NaN, never +inf
    # (found by tests/fuzz's cgroup_memory target).
    tree = SysTree("cgroup_ranges", tmp_path)
    s, _ = open_sampler(tree, cgroup=True)
    (tree.root / "sys" / "fs" / "cgroup" / "job" / "memory.current").write_text("max\n")
    row, _ = take(s)
    nan("memory_current", row["cgroup/memory_current_bytes"])
    exact("memory_max", row["cgroup/memory_max_bytes"], INF)
    assert "memory.current: malformed" in s.errors["cgroup"], s.errors


def test_cgroup_cpu_percent_bounded_by_online_cpus_without_cpuset(tmp_path):
    # no cpuset.cpus.effective (cpuset controller not enabled): the 64 online CPUs bound it
    tree = SysTree("cgroup_ranges", tmp_path)
    tree.remove_sys("fs/cgroup/job/cpuset.cpus.effective")
    (tree.root / "sys" / "devices" / "system" / "cpu" / "online").write_text("0-1\n")
    s, _ = open_sampler(tree, cgroup=True)
    tree.apply("v2")
    row, _ = take(s)
    assert row["cgroup/cpu_percent"] == 200.0, row["cgroup/cpu_percent"]


def test_cgroup_file_of_pid_not_a_regular_file(tmp_path):
    # /proc/self/cgroup as a FIFO: refused at open (O_NONBLOCK: no writer cannot block it)
    tree = SysTree("cgroup_ranges", tmp_path)
    (tree.root / "proc" / "self" / "cgroup").unlink()
    os.mkfifo(tree.root / "proc" / "self" / "cgroup")
    s, _ = open_sampler(tree, cgroup=True)
    assert s.channels == ()
    assert s.errors["cgroup"] == tree.proc + "/self/cgroup: not a regular file", s.errors
