"""The report's table as people read it (issue 29, item 4): one section per source, a since-boot total as its
increase over the trace (not min/mean of the total), no pid or slot statistics, each source's problem said once
and short, and a Composer-layout trace under the sampler's names, the ones ``--by`` uses. Exact text."""
from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

import pytest

from sysprof.report import TraceData, by_phase, summarize
from sysprof.report.table import print_table, short_problem, table_layout
from cli_support import run_cli
from test_cli_report import composer_trace  # noqa: F401  (a fixture: Composer's layout, one batch span)

T0 = 1_700_000_000_000_000  # µs
MODES = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
CGROUP_ERROR = ("/sys/fs/cgroup/unified/: memory.current: No such file or directory; memory.max: No such file or "
                "directory; memory.stat: No such file or directory; cpu.stat: no throttling statistics (cpu "
                "controller not enabled here); cpu.max: No such file or directory; io.stat: No such file or directory")
GPU_ERROR = ("NVML library not loadable (libnvidia-ml.so.1): libnvidia-ml.so.1: cannot open shared object file: No "
             "such file or directory; no NVIDIA driver installed? SYSPROF_NVML_LIBRARY names another path")


def _events():
    """11 rows at 0.25 s on 2 CPUs, the command's exit at 2.75 s.

    cpu: since boot 8120 s user and 8038 s idle; each row adds 0.25 s user and 0.25 s idle (2 CPUs x 0.25 s):
    50 % busy, 2.5 s user over the trace. disk/vda: read_bytes since boot 32.33 GB, 1 MB more each row (its rate
    4 MB/s); read_time_seconds 770.25 s, 0.0625 s more each row; vmstat/pgmajfault_total stays 17445.
    process: rss 50 MB. process_tree: slot 0 pid 4242 throughout, slot 1 pid 4250 then 4251 (rss 3 MB)."""
    ev = [{"name": "sysprof start", "ph": "i", "s": "g", "ts": T0, "pid": 1, "tid": 0,
           "args": {"version": "test", "command_line": "train", "interval_s": 0.25, "backend": "native",
                    "cpu_count": 2, "errors": {"gpu": GPU_ERROR, "cgroup": CGROUP_ERROR}}}]
    for i in range(11):
        ts = T0 + i * 250_000
        cpu = {f"{m}_seconds_total": 0.0 for m in MODES}
        cpu.update(user_seconds_total=8120.0 + 0.25 * i, idle_seconds_total=8038.0 + 0.25 * i)
        if i:
            cpu.update(percent=50.0, user_percent=50.0, idle_percent=50.0)
        ev += [{"name": "cpu", "ph": "C", "ts": ts, "pid": 1, "tid": 0, "args": cpu},
               {"name": "memory", "ph": "C", "ts": ts, "pid": 1, "tid": 0, "args": {"used_bytes": 2.5e9}},
               {"name": "disk/vda", "ph": "C", "ts": ts, "pid": 1, "tid": 0,
                "args": {"read_bytes": 32.33e9 + 1e6 * i, "read_time_seconds": 770.25 + 0.0625 * i,
                         "read_bytes_per_second": 4e6}},
               {"name": "vmstat", "ph": "C", "ts": ts, "pid": 1, "tid": 0, "args": {"pgmajfault_total": 17445.0}},
               {"name": "process", "ph": "C", "ts": ts, "pid": 1, "tid": 0, "args": {"rss_bytes": 5e7}},
               {"name": "process_tree", "ph": "C", "ts": ts, "pid": 1, "tid": 0, "args": {"num_processes": 2.0}},
               {"name": "process_tree/0", "ph": "C", "ts": ts, "pid": 1, "tid": 0, "args": {"pid": 4242.0}},
               {"name": "process_tree/1", "ph": "C", "ts": ts, "pid": 1, "tid": 0,
                "args": {"pid": 4250.0 if i < 5 else 4251.0, "rss_bytes": 3e6}}]
    ev[0]["args"]["channels"] = list(dict.fromkeys(f"{e['name']}/{k}" for e in ev if e["ph"] == "C" for k in e["args"]))
    members = [{"slot": 0, "pid": 4242, "comm": "python3", "start_ns": 0, "end_ns": 1},
               {"slot": 1, "pid": 4250, "comm": "pt_data_worker", "start_ns": 0, "end_ns": 1},
               {"slot": 1, "pid": 4251, "comm": "pt_data_worker", "start_ns": 1, "end_ns": 2}]
    ev.append({"name": "sysprof stop", "ph": "i", "s": "g", "ts": T0 + 2_750_000, "pid": 1, "tid": 0,
               "args": {"stats": {"taken": 11, "dropped": 0}, "returncode": 0, "process_tree_members": members,
                        "errors": {"gpu": GPU_ERROR, "cgroup": CGROUP_ERROR,
                                   "process": "/proc/4242/stat: No such process"}}})
    return ev


def _table(events, show_all=False) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        print_table(summarize(TraceData(events)), "t.json", show_all=show_all)
    return out.getvalue()


EXPECTED = """\
trace:      t.json
command:    train  (exit status 0)
backend:    native   version: test
samples:    11 over 2.750 s; effective rate 4.0 Hz (interval 250 ms = 4 Hz)
dropped:    0   missed deadlines: n/a   sample cost: mean n/a, p99 n/a
unavailable: cgroup: /sys/fs/cgroup/unified/: memory.current, memory.max and 3 more: No such file or directory; \u2026
unavailable: gpu: NVML library not loadable (libnvidia-ml.so.1): cannot open shared object file: \u2026
            (\u2026: cut short; report --json has the whole text under "errors")

channel                           unit        min       mean        p95        max    amount
cpu (/proc/stat)
  cpu/percent                     %          50.0       50.0       50.0       50.0     2.5 s
  cpu/user_percent                %          50.0       50.0       50.0       50.0     2.5 s
  cpu/idle_percent                %          50.0       50.0       50.0       50.0     2.5 s
memory (/proc/meminfo)
  memory/used_bytes               B       2.50 GB    2.50 GB    2.50 GB    2.50 GB
disk (/proc/diskstats)
  disk/vda/read_time_seconds      s                                                   625 ms
  disk/vda/read_bytes_per_second  B/s   4.00 MB/s  4.00 MB/s  4.00 MB/s  4.00 MB/s  10.00 MB
process (/proc/<pid>/stat)
  process/rss_bytes               B      50.00 MB   50.00 MB   50.00 MB   50.00 MB
process_tree (/proc/<pid>/{stat,smaps_rollup,task/<tid>/children})
  process_tree/num_processes      -             2          2          2          2
  members: 3 processes: python3 (4242), pt_data_worker (4250, 4251)
amount: accrued over the trace (a total's increase, a rate's integral, a CPU share's CPU-seconds, energy from power)
hidden (--all shows them): 7 always 0 or unchanged, 3 totals in a row's amount, 1 per-member series
not statistics (--json has them): 2 channels (process_tree/<slot>/pid)
"""


def test_the_table_has_sections_increases_and_no_pids():
    assert _table(_events()) == EXPECTED


def test_all_shows_the_totals_as_increases_and_the_members_series_but_never_a_pid():
    text = _table(_events(), show_all=True)
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines() if line.startswith("  ") and
            "/" in line.split()[0]}
    # since boot 32.33 GB: only the increase, 10 MB; 8120 s of user time: the trace's 2.5 s
    assert rows["disk/vda/read_bytes"] == ["B", "10.00", "MB"]
    assert rows["cpu/user_seconds_total"] == ["s", "2.5", "s"]
    assert rows["vmstat/pgmajfault_total"] == ["-", "0"]
    assert rows["process_tree/1/rss_bytes"][:3] == ["B", "3.00", "MB"]
    assert not any(ch.endswith("/pid") for ch in rows)
    assert "hidden" not in text and "not statistics (--json has them): 2 channels" in text


def test_json_table_is_the_text_s_layout_and_keeps_the_full_errors(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": _events()}))
    proc = run_cli("report", "--json", path)
    assert proc.returncode == 0, proc.stderr
    s = json.loads(proc.stdout)
    assert s["report_version"] == 2
    assert [(sec["source"], sec["rows"]) for sec in s["table"]["sections"]] == [
        ("cpu", ["cpu/percent", "cpu/user_percent", "cpu/idle_percent"]), ("memory", ["memory/used_bytes"]),
        ("disk", ["disk/vda/read_time_seconds", "disk/vda/read_bytes_per_second"]),
        ("process", ["process/rss_bytes"]), ("process_tree", ["process_tree/num_processes"])]
    assert s["table"]["sections"][-1]["facts"] == ["members: 3 processes: python3 (4242), pt_data_worker (4250, 4251)"]
    assert s["table"]["hidden"] == {"idle": 7, "carried": 3, "members": 1}
    assert s["table"]["not_statistics"] == ["process_tree/0/pid", "process_tree/1/pid"]
    total = s["channels"]["disk/vda/read_bytes"]
    assert (total["kind"], total["source"], total["amount"], total["amount_unit"]) == ("counter32", "disk", 1e7, "B")
    assert total["min"] == 32.33e9  # the statistics of the total stay in the JSON (report_version 1's keys)
    assert s["channels"]["disk/vda/read_bytes_per_second"]["amount"] == 1e7  # its total's increase
    assert s["channels"]["disk/vda/read_time_seconds"]["amount"] == pytest.approx(0.625)
    assert s["channels"]["cpu/user_percent"]["amount"] == pytest.approx(2.5)
    assert s["errors"]["cgroup"] == CGROUP_ERROR and s["errors"]["process"].endswith("No such process")
    assert s["problems"] == {"cgroup": "/sys/fs/cgroup/unified/: memory.current, memory.max and 3 more: No such file "
                                       "or directory; \u2026",
                             "gpu": "NVML library not loadable (libnvidia-ml.so.1): cannot open shared object file: "
                                    "\u2026"}
    assert s["process_tree_members"][1] == {"slot": 1, "pid": 4250, "comm": "pt_data_worker"}
    text = run_cli("report", path).stdout
    shown = [line.split()[0] for line in text.splitlines() if line.startswith("  ") and "/" in line.split()[0]]
    assert shown == [ch for sec in s["table"]["sections"] for ch in sec["rows"]]


def test_a_process_gone_is_a_problem_without_a_command_s_exit():
    ev = _events()
    del ev[-1]["args"]["returncode"]  # `record --pid P`: the followed process ended on its own
    assert "problems: process: /proc/4242/stat: No such process\n" in _table(ev)


def test_a_truncated_trace_names_the_members_from_their_pid_channels():
    ev = _events()[:-1]  # no stop event
    assert "  members: 3 processes: pid (4242, 4250, 4251)\n" in _table(ev)


def test_short_problem_says_each_reason_once():
    assert short_problem(CGROUP_ERROR, 200) == (
        "/sys/fs/cgroup/unified/: memory.current, memory.max, memory.stat, cpu.max, io.stat: No such file or directory; "
        "cpu.stat: no throttling statistics (cpu controller not enabled here)")
    assert short_problem(GPU_ERROR, 200) == (
        "NVML library not loadable (libnvidia-ml.so.1): cannot open shared object file: No such file or directory; "
        "no NVIDIA driver installed? SYSPROF_NVML_LIBRARY names another path")
    # a ": " inside parentheses is no separator; the same subject and reason twice is said once
    text = "gpu 0: power_watts read NaN (NVML_FI_DEV_POWER_INSTANT: NOT_SUPPORTED); gpu 0: power_watts read NaN " \
           "(NVML_FI_DEV_POWER_INSTANT: NOT_SUPPORTED); gpu 1: ecc: NOT_SUPPORTED; gpu 2: ecc: NOT_SUPPORTED"
    assert short_problem(text, 200) == ("gpu 0: power_watts read NaN (NVML_FI_DEV_POWER_INSTANT: NOT_SUPPORTED); "
                                        "gpu 1: ecc, gpu 2: ecc: NOT_SUPPORTED")
    assert short_problem("no /proc/pressure", 10) == "no /proc \u2026"
    assert len(short_problem(CGROUP_ERROR, 60)) <= 63


def test_a_composer_trace_is_tabled_under_the_names_by_uses(composer_trace):
    from sysprof.trace.chrome import read_trace

    text = _table(read_trace(str(composer_trace)))
    assert text.split("\n\n", 1)[1] == """\
channel                           unit          min         mean          p95          max    amount
cpu (/proc/stat)
  cpu/percent                     %             0.0         24.5         47.0         49.0
memory (/proc/meminfo)
  memory/used_bytes               B         1.50 GB      1.75 GB      1.97 GB      1.99 GB
  memory/available_bytes          B        20.00 GB     20.00 GB     20.00 GB     20.00 GB
disk (/proc/diskstats)
  disk/sda/read_bytes             B                                                         49.00 MB
  disk/sda/read_time_seconds      s                                                           147 ms
net (/proc/net/dev)
  net/eth0/bytes_recv_per_second  B/s   200.00 kB/s  200.00 kB/s  200.00 kB/s  200.00 kB/s  98.00 kB
amount: accrued over the trace (a total's increase, a rate's integral, a CPU share's CPU-seconds, energy from power)
hidden (--all shows them): 1 total in a row's amount
"""
    data = TraceData(read_trace(str(composer_trace)))
    (batch,) = by_phase(data, "event/batch")
    assert set(batch.channels) == set(summarize(data)["channels"])
    s = json.loads(run_cli("report", "--json", "--by", "event/batch", composer_trace).stdout)
    assert set(s["phases"][0]["channels"]) == set(s["channels"])
    assert s["channels"]["disk/sda/read_time_seconds"]["max"] == pytest.approx(0.147)
    assert s["channels"]["net/eth0/bytes_recv"]["amount"] == pytest.approx(98e3)
    assert table_layout(s, show_all=False) == s["table"]


def test_gpu_ids_and_bitmasks_are_no_statistics_and_a_power_limit_accrues_no_energy():
    ev = [{"name": "sysprof start", "ph": "i", "ts": T0, "args": {"interval_s": 0.5}}]
    for i in range(5):
        ev.append({"name": "gpu/0", "ph": "C", "ts": T0 + i * 500_000,
                   "args": {"power_watts": 200.0, "power_limit_watts": 700.0, "energy_joules": 5e6 + 100.0 * i,
                            "clocks_event_reasons": 4.0, "xid_total": 1.0, "xid_last": 79.0}})
    ev.append({"name": "sysprof stop", "ph": "i", "ts": T0 + 2_500_000, "args": {"stats": {"taken": 5}}})
    rows = {line.split()[0]: line.split()[1:] for line in _table(ev).splitlines() if line.startswith("  gpu/")}
    # 200 W over 2.5 s = 500 J; the energy counter since the driver loaded (5 MJ): its 400 J increase
    assert rows == {"gpu/0/power_watts": ["W", "200", "200", "200", "200", "500", "J"],
                    "gpu/0/power_limit_watts": ["W", "700", "700", "700", "700"],
                    "gpu/0/energy_joules": ["J", "400", "J"]}
    assert "not statistics (--json has them): 2 channels (gpu/<index>/clocks_event_reasons, gpu/<index>/xid_last)" \
        in _table(ev)
