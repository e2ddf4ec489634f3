"""The channel range rules (csrc/engine/ranges.hpp): which rule each channel name gets (the registry's declared
range, generated into the extension at build time), the bounds of each rule, and their enforcement by the native
sampler (out of range -> NaN, named in errors).

The rules: percent [0, 100]; percent of one core [0, 100 x online CPUs]; share [0, 1]; non-negative
(finite >= 0); limit (>= 0 or +inf, for "max"); celsius [-273.15, 1000]; and, for a name no rule
matches, any finite value. NaN is never a violation; +inf is one everywhere but for limits.
"""

import math
import sys

import pytest

if not sys.platform.startswith("linux"):
    pytest.skip("the range rules live in the native extension (Linux)", allow_module_level=True)

import sysprof
from sysprof import _native
from sysprof.sampling import registry

INF = math.inf
NAN = math.nan

PERCENT = "percent [0, 100]"
CORE = "percent of one core [0, 100 x online CPUs]"
SHARE = "share [0, 1]"
NONNEG = "non-negative finite"
LIMIT = "limit (>= 0 or +inf)"
CELSIUS = "celsius [-273.15, 1000]"
FINITE = "finite"


def rules(names, max_cores=1.0):
    got, _, _, _ = _native._check_ranges(list(names), max_cores, [0.0] * len(names))
    return dict(zip(names, got))


def check(name, values, max_cores=1.0):
    """(violation or None per value, enforced values, count) for one channel."""
    why, out, n = [], [], 0
    for v in values:
        _, w, o, k = _native._check_ranges([name], max_cores, [v])
        why.append(w[0])
        out.append(o[0])
        n += k
    return why, out, n


# Every channel the reference's table (docs/reference.md) and its GPU section name (device parts filled in), by rule.
EXPECTED = {
    PERCENT: ["cpu/percent", "cpu/user_percent", "cpu/nice_percent", "cpu/system_percent", "cpu/idle_percent",
              "cpu/iowait_percent", "cpu/irq_percent", "cpu/softirq_percent", "cpu/steal_percent", "cpu/0/percent",
              "cpu/1023/percent", "memory/used_percent", "pressure/cpu/some_avg10_percent",
              "pressure/memory/full_avg60_percent", "pressure/io/some_avg300_percent", "gpu/0/utilization_percent",
              "gpu/7/memory_utilization_percent"],
    CORE: ["process/cpu_percent", "process_tree/cpu_percent", "cgroup/cpu_percent"],
    SHARE: ["disk/sda/busy_time_seconds_per_second", "pressure/cpu/some_seconds_per_second",
            "pressure/io/full_seconds_per_second"],
    NONNEG: ["memory/total_bytes", "memory/available_bytes", "memory/used_bytes", "memory/free_bytes",
             "memory/buffers_bytes", "memory/cached_bytes", "memory/dirty_bytes", "memory/writeback_bytes",
             "swap/total_bytes", "swap/used_bytes", "swap/free_bytes",
             "disk/sda/read_bytes", "disk/sda/write_bytes", "disk/sda/read_count", "disk/sda/write_count",
             "disk/sda/busy_time_seconds", "disk/sda/read_time_seconds", "disk/sda/write_time_seconds",
             "disk/sda/read_bytes_per_second", "disk/sda/write_bytes_per_second", "disk/sda/read_count_per_second",
             "disk/sda/write_count_per_second",
             "net/eth0/bytes_recv", "net/eth0/bytes_sent", "net/eth0/packets_recv", "net/eth0/packets_sent",
             "net/eth0/errors_in", "net/eth0/errors_out", "net/eth0/drops_in", "net/eth0/drops_out",
             "net/eth0/bytes_recv_per_second", "net/eth0/packets_sent_per_second",
             "load/1m", "load/5m", "load/15m", "load/procs_running", "load/procs_total",
             "process/rss_bytes", "process/vms_bytes", "process/cpu_seconds_total", "process/num_threads",
             "process_tree/num_processes", "process_tree/rss_bytes", "process_tree/cpu_seconds_total",
             "process_tree/num_threads", "pressure/memory/some_seconds_total",
             "cgroup/memory_current_bytes", "cgroup/memory_anon_bytes", "cgroup/memory_file_bytes",
             "cgroup/cpu_usage_seconds_total", "cgroup/cpu_user_seconds_total", "cgroup/cpu_system_seconds_total",
             "cgroup/cpu_throttled_seconds_total", "cgroup/cpu_throttled_periods_total", "cgroup/cpu_periods_total",
             "cgroup/io_read_bytes", "cgroup/io_write_bytes", "cgroup/io_read_bytes_per_second",
             "cgroup/io_write_bytes_per_second",
             "vmstat/pgfault_total", "vmstat/pgmajfault_total", "vmstat/pgfault_per_second",
             "vmstat/pgmajfault_per_second", "vmstat/pswpin_total", "vmstat/pswpout_total",
             "vmstat/pgscan_kswapd_total", "vmstat/pgscan_direct_total", "vmstat/pgsteal_kswapd_total",
             "vmstat/pgsteal_direct_total", "vmstat/oom_kill_total", "vmstat/workingset_refault_anon_total",
             "vmstat/workingset_refault_file_total",
             "gpu/0/memory_used_bytes", "gpu/0/memory_total_bytes", "gpu/0/memory_free_bytes",
             "gpu/0/memory_reserved_bytes", "gpu/0/power_watts", "gpu/0/energy_joules", "gpu/0/energy_power_watts",
             "gpu/0/sm_clock_hz", "gpu/0/memory_clock_hz", "gpu/0/pcie_tx_bytes_per_second",
             "gpu/0/pcie_rx_bytes_per_second", "gpu/0/nvlink_tx_bytes_per_second", "gpu/0/nvlink_rx_bytes_per_second"],
    LIMIT: ["cgroup/memory_max_bytes", "cgroup/cpu_limit_cores"],
    CELSIUS: ["gpu/0/temperature_celsius"],
}


def test_every_documented_channel_gets_its_rule():
    names = [n for group in EXPECTED.values() for n in group]
    got = rules(names)
    wrong = {n: got[n] for rule, group in EXPECTED.items() for n in group if got[n] != rule}
    assert wrong == {}


def test_every_channel_of_the_native_sources_has_a_rule():
    # All host sources on this machine: a channel added without a rule would read "finite".
    s = sysprof.Sampler(backend="native", cpu=True, per_cpu=True, memory=True, disk=True, net=True, load=True,
                        process=True, process_tree=True, pressure=True, cgroup=True, vmstat=True)
    assert len(s.channels) > 20
    got = rules(s.channels)
    assert [n for n in s.channels if got[n] == FINITE] == []


def test_device_names_never_decide_the_rule():
    # the channel's pattern decides, whatever the disk or NIC is called (a '/' in a disk's name is '!', as in sysfs)
    got = rules(["disk/foo_percent/read_bytes", "disk/cciss!c0d0/busy_time_seconds_per_second",
                 "net/x_celsius/bytes_recv", "disk/sdb_max_bytes/write_count", "net/percent/drops_in"])
    assert got == {"disk/foo_percent/read_bytes": NONNEG, "disk/cciss!c0d0/busy_time_seconds_per_second": SHARE,
                   "net/x_celsius/bytes_recv": NONNEG, "disk/sdb_max_bytes/write_count": NONNEG,
                   "net/percent/drops_in": NONNEG}


#: the registry's range names -> the native rule's name (csrc/engine/ranges.cpp, range_name)
REGISTRY_RULE = {registry.PERCENT: PERCENT, registry.CORE_PERCENT: CORE, registry.SHARE: SHARE,
                 registry.NON_NEGATIVE: NONNEG, registry.LIMIT: LIMIT, registry.CELSIUS: CELSIUS,
                 registry.FINITE: FINITE}
#: example values of each placeholder, hostile ones among them (a device named like a unit or another field)
EXAMPLES = {"<dev>": ["sda", "nvme0n1", "foo_percent", "cciss!c0d0", "x_max_bytes", "busy_time_seconds_per_second"],
            "<nic>": ["eth0", "x_celsius", "percent", "bytes_recv_per_second"],
            "<id>": ["0", "1023"], "<index>": ["0", "7"], "<slot>": ["0", "63"]}


def instances(pattern):
    names = [pattern]
    for placeholder, values in EXAMPLES.items():
        if placeholder in pattern:
            names = [n.replace(placeholder, v) for n in names for v in values]
    return names


def test_native_rule_is_the_registry_rule_for_every_channel():
    assert set(REGISTRY_RULE) == set(registry.RANGES)
    expected = {}
    for src in registry.SOURCES.values():
        for spec in src.channels:
            names = instances(spec.pattern)
            assert all("<" not in n for n in names), f"{spec.pattern}: add its placeholder to EXAMPLES"
            for name in names:
                assert registry.channel_spec(name) == spec, name  # the example names the channel it stands for
                expected[name] = REGISTRY_RULE[spec.range]
    assert len(expected) > 300
    got = rules(list(expected))
    assert {n: got[n] for n in expected if got[n] != expected[n]} == {}
    # and every declared range is a real rule: no registry channel is left at "any finite value"
    assert [n for n, r in expected.items() if r == FINITE] == []


def test_a_channel_row_must_declare_its_range():
    with pytest.raises(TypeError):
        registry._ch("x/y_bytes", "B", "gauge", "help", "field")  # noqa: the missing range is the point
    with pytest.raises(AssertionError, match="range 'bytes'"):
        registry._ch("x/y_bytes", "B", "gauge", "help", "field", "bytes")


def test_unmatched_name_is_any_finite_value():
    assert rules(["something/new", "x"]) == {"something/new": FINITE, "x": FINITE}
    why, out, n = check("something/new", [-1e308, 0.0, 1e308, NAN, INF, -INF])
    assert why == [None, None, None, None, FINITE, FINITE]
    assert n == 2 and out[:3] == [-1e308, 0.0, 1e308] and all(math.isnan(v) for v in out[3:])


@pytest.mark.parametrize("name, ok, bad", [
    ("cpu/percent", [0.0, -0.0, 50.0, 100.0], [-1e-300, 100.00000000000001, 250.0, 1.8e21]),
    ("memory/used_percent", [0.0, 100.0], [-5.0, 101.0]),
    ("disk/sda/busy_time_seconds_per_second", [0.0, 0.5, 1.0], [1.0000000000000002, -0.1]),
    ("swap/used_bytes", [0.0, 1.0, 1.7976931348623157e308], [-1.0, -1e-300]),
    ("process/num_threads", [0.0, 1.0], [-5.0]),
    ("cgroup/memory_max_bytes", [0.0, 1073741824.0, INF], [-1.0]),
    ("gpu/0/temperature_celsius", [-273.15, 0.0, 85.0, 1000.0], [-273.16, 1000.0000000000001, -1e9]),
])
def test_rule_bounds(name, ok, bad):
    why, out, n = check(name, ok + bad)
    assert why[:len(ok)] == [None] * len(ok), f"{name}: rejected {[v for v, w in zip(ok, why) if w]}"
    assert all(w is not None for w in why[len(ok):]), f"{name}: accepted {[v for v, w in zip(bad, why[len(ok):]) if not w]}"
    assert out[:len(ok)] == ok and all(math.isnan(v) for v in out[len(ok):]) and n == len(bad)


def test_core_percent_scales_with_online_cpus():
    for cores, top in ((1.0, 100.0), (2.0, 200.0), (64.0, 6400.0)):
        why, _, _ = check("cgroup/cpu_percent", [0.0, top, top * (1 + 1e-15), -1.0], max_cores=cores)
        assert why == [None, None, CORE, CORE], cores
    # no CPU count (0) is taken as one CPU, never as "nothing allowed"
    assert check("process/cpu_percent", [100.0, 100.5], max_cores=0.0)[0] == [None, CORE]


def test_plus_infinity_only_for_limits_and_nan_never_a_violation():
    names = [group[0] for group in EXPECTED.values()] + ["unmatched/name"]
    for name in names:
        limit = rules([name])[name] == LIMIT
        why, _, _ = check(name, [INF, -INF, NAN])
        assert (why[0] is None) == limit, name
        assert why[1] is not None and why[2] is None, name


def test_enforce_counts_and_clears_only_the_bad_values():
    names = ["cpu/percent", "memory/total_bytes", "cgroup/memory_max_bytes", "pressure/io/some_seconds_per_second",
             "gpu/0/temperature_celsius"]
    values = [100.5, 8e9, INF, 1.5, 40.0]
    _, why, out, n = _native._check_ranges(names, 2.0, values)
    assert n == 2
    assert [w is None for w in why] == [False, True, True, False, True]
    assert math.isnan(out[0]) and out[1] == 8e9 and out[2] == INF and math.isnan(out[3]) and out[4] == 40.0
    with pytest.raises(ValueError):
        _native._check_ranges(names, 2.0, values[:2])


def test_sampler_writes_nan_for_an_out_of_range_value(tmp_path):
    # PSI avg10 is a percent: 250 is outside [0, 100] and reads NaN; the line's other values stay.
    (tmp_path / "proc" / "pressure").mkdir(parents=True)
    (tmp_path / "sys").mkdir()
    (tmp_path / "proc" / "pressure" / "cpu").write_text("some avg10=250.00 avg60=1.50 avg300=0.25 total=100\n")
    s = sysprof.Sampler(backend="native", proc_root=str(tmp_path / "proc"), sys_root=str(tmp_path / "sys"),
                        cpu=False, memory=False, disk=False, net=False, pressure=True)
    row = s.sample()
    assert math.isnan(row["pressure/cpu/some_avg10_percent"])
    assert row["pressure/cpu/some_avg60_percent"] == 1.5
    assert row["pressure/cpu/some_avg300_percent"] == 0.25
    assert row["pressure/cpu/some_seconds_total"] == 100 / 1e6
    msg = s.errors.get("pressure", "")
    if "outside its range" in msg:  # caught by the safety net (a parser that rejects 250 itself logs its own)
        assert "pressure/cpu/some_avg10_percent read 250" in msg


def _generate(tmp_path, source):
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    reg = tmp_path / "registry.py"
    reg.write_text(source)
    out = tmp_path / "gen" / "channels.hpp"
    run = subprocess.run([sys.executable, str(root / "csrc" / "gen" / "gen_channels.py"), str(out), str(reg)],
                         capture_output=True, text=True)
    return run, out


def test_the_generated_table_is_the_registry_and_a_row_without_a_range_stops_the_build(tmp_path):
    from pathlib import Path

    source = (Path(__file__).resolve().parents[1] / "sysprof" / "sampling" / "registry.py").read_text()
    run, out = _generate(tmp_path, source)
    assert run.returncode == 0, run.stderr
    text = out.read_text()
    assert '{"cpu/percent", Range::kPercent},' in text
    assert '{"disk/<dev>/busy_time_seconds_per_second", Range::kShare},' in text
    assert '{"cgroup/cpu_limit_cores", Range::kLimit},' in text
    assert text.count("Range::k") == sum(len(s.channels) for s in registry.SOURCES.values())
    # a row as another branch might add it, without its range: one line naming the registry and what is missing
    row = '_ch("load/1m", "", "gauge", "load average over 1 minute", "loadavg field 1", NON_NEGATIVE)'
    assert row in source
    run, _ = _generate(tmp_path, source.replace(row, row.replace(", NON_NEGATIVE)", ")")))
    assert run.returncode != 0
    msg = run.stderr.strip().splitlines()[-1]
    assert "registry.py" in msg and "range" in msg, msg
