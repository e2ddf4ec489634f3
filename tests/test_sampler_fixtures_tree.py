"""process_tree's per-member slots and proportional memory, on hand-written trees (tests/fixtures/process_tree_pss)
and live: exact values from the fixture files, the slot rules of csrc/sources/process_tree.cpp (a member keeps its
slot; an exited member's slot reads NaN for at least one row before it is handed on; members beyond the slots are
summed and counted), Sampler.members, the option, and the psutil twin.

process_tree_pss/v1: root 100 (train.py) and workers 101, 102 (pt_data_worker), forked: the three map 240000 kB
of shared pages, and hold 60000, 30000 and 30000 kB of their own. Rss: 300000 + 270000 + 270000 = 840000 kB;
Pss: (60000 + 80000) + 2 x (30000 + 80000) = 360000 kB. v2: 102 has exited, and 104 was forked meanwhile.
"""

import math
import os
import time
from pathlib import Path

import numpy as np
import pytest

import sysprof
from test_sampler_fixtures import CLK_TCK, PAGE, Tree, check_error, exact, nan, open_sampler, take
from test_sampler_fixtures_process import SLOT_FIELDS, TREE_TOTALS

KB = 1024.0
PSS = {100: 140000 * KB, 101: 110000 * KB, 102: 110000 * KB, 104: 110000 * KB}
USS = {100: 60000 * KB, 101: 30000 * KB, 102: 30000 * KB, 104: 30000 * KB}
RSS_PAGES = {100: 75000, 101: 67500, 102: 67500, 104: 67500}


def slot(row, k):
    return {f: row[f"process_tree/{k}/{f}"] for f in SLOT_FIELDS}


def check_member(row, k, pid, cpu_ticks, threads):
    s = slot(row, k)
    exact(f"{k}/pid", s["pid"], float(pid))
    exact(f"{k}/rss_bytes", s["rss_bytes"], RSS_PAGES[pid] * float(PAGE))
    exact(f"{k}/pss_bytes", s["pss_bytes"], PSS[pid])
    exact(f"{k}/uss_bytes", s["uss_bytes"], USS[pid])
    exact(f"{k}/cpu_seconds_total", s["cpu_seconds_total"], cpu_ticks / CLK_TCK)
    exact(f"{k}/num_threads", s["num_threads"], float(threads))


def check_empty(row, k):
    for f, v in slot(row, k).items():
        nan(f"{k}/{f}", v)


def test_pss_counts_shared_pages_once(tmp_path):
    tree = Tree("process_tree_pss", tmp_path)
    s, _ = open_sampler(tree, process_tree=True, pid=100, process_tree_slots=4)
    assert s.errors == {}
    assert s.channels == TREE_TOTALS + tuple(f"process_tree/{k}/{f}" for k in range(4) for f in SLOT_FIELDS)
    row = s.sample()
    exact("num_processes", row["process_tree/num_processes"], 3.0)
    exact("rss_bytes", row["process_tree/rss_bytes"], (75000 + 2 * 67500) * float(PAGE))
    exact("pss_bytes", row["process_tree/pss_bytes"], 360000 * KB)  # the shared 240000 kB counted once
    exact("uss_bytes", row["process_tree/uss_bytes"], 120000 * KB)
    exact("num_unslotted", row["process_tree/num_unslotted"], 0.0)
    check_member(row, 0, 100, 100 + 10, 2)
    check_member(row, 1, 101, 200 + 10, 1)
    check_member(row, 2, 102, 300 + 10, 1)
    check_empty(row, 3)


def test_members_beyond_the_slots_are_summed_and_counted(tmp_path):
    tree = Tree("process_tree_pss", tmp_path)
    s, _ = open_sampler(tree, process_tree=True, pid=100, process_tree_slots=2)
    row = s.sample()
    assert len(s.channels) == len(TREE_TOTALS) + 2 * len(SLOT_FIELDS)
    check_member(row, 0, 100, 110, 2)
    check_member(row, 1, 101, 210, 1)
    exact("num_unslotted", row["process_tree/num_unslotted"], 1.0)  # 102
    exact("num_processes", row["process_tree/num_processes"], 3.0)
    exact("pss_bytes", row["process_tree/pss_bytes"], 360000 * KB)
    exact("cpu_seconds_total", row["process_tree/cpu_seconds_total"], (110 + 210 + 310) / CLK_TCK)


def test_no_slots_leaves_the_totals(tmp_path):
    tree = Tree("process_tree_pss", tmp_path)
    s, _ = open_sampler(tree, process_tree=True, pid=100, process_tree_slots=0)
    assert s.channels == TREE_TOTALS
    row = s.sample()
    exact("num_unslotted", row["process_tree/num_unslotted"], 3.0)
    exact("pss_bytes", row["process_tree/pss_bytes"], 360000 * KB)


def _until(s, cond, tries=30):
    """sample() until cond(row) (a discovery runs at most every 100 ms, a few files per read); bounded."""
    for _ in range(tries):
        row = s.sample()
        if cond(row):
            return row
        time.sleep(0.05)
    raise AssertionError(f"not reached in {tries} reads: {row}")


def _set_stat(tree, pid, utime=None, threads=None):
    """Rewrites proc/<pid>/stat with another utime and/or num_threads (fields 14 and 20)."""
    text = (Path(tree.proc) / str(pid) / "stat").read_text()
    head, _, tail = text.rpartition(") ")
    f = tail.split(" ")  # f[0] is field 3 (state)
    if utime is not None:
        f[11] = str(utime)
    if threads is not None:
        f[17] = str(threads)
    tree.write(f"{pid}/stat", head + ") " + " ".join(f))


def test_member_cpu_percent_is_bounded_by_its_threads(tmp_path):
    # process_tree/v1: 100 (2 threads), 101 (3; made single-threaded here), 102 (4), 103 (5); 64 online CPUs.
    # Each member then gains 1000 ticks (10 s of CPU) within one read's window: far more than its threads can run.
    tree = Tree("process_tree", tmp_path)
    utime = {100: 100, 101: 200, 102: 300, 103: 400}
    _set_stat(tree, 101, threads=1)
    s, _ = open_sampler(tree, process_tree=True, pid=100)
    take(s)

    def burst(threads):
        for pid in utime:
            utime[pid] += 1000
            _set_stat(tree, pid, utime=utime[pid], threads=threads.get(pid))
        row, _ = take(s)
        return {int(row[f"process_tree/{k}/pid"]): row[f"process_tree/{k}/cpu_percent"] for k in range(4)}

    # 102 drops from 4 threads to 1 in the window: the larger count bounds it
    got = burst({102: 1})
    assert got == {100: 200.0, 101: 100.0, 102: 400.0, 103: 500.0}, got
    got = burst({})  # 102 single-threaded through the window now
    assert got == {100: 200.0, 101: 100.0, 102: 100.0, 103: 500.0}, got


def test_exited_member_slot_reads_nan_then_is_reused(tmp_path):
    tree = Tree("process_tree_pss", tmp_path)
    s, _ = open_sampler(tree, process_tree=True, pid=100, process_tree_slots=3)
    check_member(s.sample(), 2, 102, 310, 1)
    tree.apply("v2")  # 102 gone, 104 new, found by the same discovery
    row = _until(s, lambda r: r["process_tree/2/pid"] != 102.0)
    # 102's slot reads NaN (not 104 at once): the change shows in the trace; 104 is summed, without a slot
    check_empty(row, 2)
    exact("num_unslotted", row["process_tree/num_unslotted"], 1.0)
    exact("num_processes", row["process_tree/num_processes"], 3.0)
    exact("pss_bytes", row["process_tree/pss_bytes"], (140000 + 110000 + 110000) * KB)
    check_member(row, 1, 101, 210, 1)  # untouched
    row = _until(s, lambda r: not math.isnan(r["process_tree/2/pid"]))
    check_member(row, 2, 104, 55, 1)  # the next discovery hands the slot on
    exact("num_unslotted", row["process_tree/num_unslotted"], 0.0)


def test_members_record_who_held_each_slot(tmp_path):
    tree = Tree("process_tree_pss", tmp_path)
    s, _ = open_sampler(tree, process_tree=True, pid=100, process_tree_slots=3, interval=0.01, capacity=1024)
    t0 = time.time_ns()
    s.start()
    time.sleep(0.15)
    tree.apply("v2")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not any(m["pid"] == 104 and m["slot"] == 2 for m in s.members):
        time.sleep(0.05)
    time.sleep(0.05)
    s.stop()
    t1 = time.time_ns()
    members = s.members
    assert s.devices == []  # tenures are not devices
    by = [(m["slot"], m["pid"], m["comm"], m["end_ns"] is None) for m in members]
    assert by == [(0, 100, "train.py", True), (1, 101, "pt_data_worker", True), (2, 102, "pt_data_worker", False),
                  (-1, 104, "pt_data_worker", False), (2, 104, "pt_data_worker", True)], by
    for m in members:
        assert t0 - 10**9 <= m["start_ns"] <= t1 and (m["end_ns"] is None or m["start_ns"] <= m["end_ns"] <= t1)
    gone, unslotted, given = members[2], members[3], members[4]
    assert gone["end_ns"] <= unslotted["end_ns"] == given["start_ns"] or unslotted["end_ns"] <= given["start_ns"]
    # the trace says the same: slot 2 holds 102, then NaN for at least one row, then 104
    pid2 = s.drain().column("process_tree/2/pid")
    seen = [float(v) for i, v in enumerate(pid2) if i == 0 or not (v == pid2[i - 1] or
                                                                   (math.isnan(v) and math.isnan(pid2[i - 1])))]
    assert seen[0] == 102.0 and math.isnan(seen[1]) and seen[2:] == [104.0], seen


def test_unreadable_smaps_rollup_reads_nan_with_one_error(tmp_path):
    tree = Tree("process_tree_pss", tmp_path)
    tree.remove("102/smaps_rollup")  # as before Linux 4.14, or another user's process (EACCES)
    s, _ = open_sampler(tree, process_tree=True, pid=100, process_tree_slots=4)
    check_error(s, "process_tree")
    assert "102/smaps_rollup" in s.errors["process_tree"] and "pss_bytes" in s.errors["process_tree"]
    row = s.sample()
    nan("pss_bytes", row["process_tree/pss_bytes"])  # a sum missing a member would understate
    nan("2/pss_bytes", row["process_tree/2/pss_bytes"])
    exact("1/pss_bytes", row["process_tree/1/pss_bytes"], PSS[101])
    exact("2/rss_bytes", row["process_tree/2/rss_bytes"], RSS_PAGES[102] * float(PAGE))  # the rest still reads
    exact("num_processes", row["process_tree/num_processes"], 3.0)


@pytest.mark.parametrize("bad", [-1, 65, 2.0, "4"])
def test_slots_option_is_checked(bad):
    with pytest.raises(ValueError, match="process_tree_slots"):
        sysprof.Sampler(process_tree=True, process_tree_slots=bad)


def test_slots_option_default_and_true():
    for given in ({}, {"process_tree_slots": True}):
        s = sysprof.Sampler(cpu=False, memory=False, disk=False, net=False, process_tree=True, **given)
        assert s.channels[-1] == "process_tree/7/num_threads", given  # 8 slots


def test_cli_slots_flag():
    from sysprof.cli import _sources_from_args, build_parser
    from sysprof.cli.sources import sampler_kwargs

    p = build_parser()
    args = p.parse_args(["record", "--process-tree", "--process-tree-slots", "3", "--", "true"])
    kw = sampler_kwargs(_sources_from_args(args, True))
    assert kw["process_tree"] is True and kw["process_tree_slots"] == 3
    args = p.parse_args(["record", "--all", "--", "true"])
    kw = sampler_kwargs(_sources_from_args(args, True))
    assert kw["process_tree_slots"] is None  # the default
    kw = sampler_kwargs(_sources_from_args(p.parse_args(["record", "--all"]), False))
    assert kw["process_tree"] is False and kw["process_tree_slots"] is None  # --all without a target


# --------------------------------------------------------------------------------------------------
# live: both backends, and an independent reader of smaps_rollup
# --------------------------------------------------------------------------------------------------
def _own_rollup():
    with open(f"/proc/{os.getpid()}/smaps_rollup") as f:
        fields = dict(line.split(":", 1) for line in f.read().splitlines()[1:])
    kb = {k: int(v.split()[0]) * 1024 for k, v in fields.items()}
    return kb["Pss"], kb["Private_Clean"] + kb["Private_Dirty"]


needs_rollup = pytest.mark.skipif(not os.path.exists("/proc/self/smaps_rollup"), reason="no smaps_rollup (< 4.14)")


@needs_rollup
@pytest.mark.parametrize("backend", ["native", "psutil"])
def test_live_pss_agrees_with_smaps_rollup(backend):
    if backend == "native" and not sysprof.native_available()[0]:
        pytest.skip("native backend unavailable")
    kw = dict(backend=backend, capacity=64, cpu=False, memory=False, disk=False, net=False, process_tree=True,
              process_tree_slots=1)
    for _ in range(5):  # Pss moves when other processes map or unmap the pages this one shares: retry a moment
        s = sysprof.Sampler(**kw)  # native: reads smaps_rollup at the first sample(); psutil: at construction
        if backend == "psutil" and "process_tree" in s.errors:
            pytest.skip(s.errors["process_tree"])
        before = _own_rollup()
        row = s.sample()
        after = _own_rollup()
        lo, hi = min(before[0], after[0]), max(before[0], after[0])
        slack = max(512 * 1024, 0.01 * hi)  # what this process allocates between the reads
        if lo - slack <= row["process_tree/0/pss_bytes"] <= hi + slack:
            break
    assert lo - slack <= row["process_tree/0/pss_bytes"] <= hi + slack, (before, row["process_tree/0/pss_bytes"], after)
    assert row["process_tree/pss_bytes"] == row["process_tree/0/pss_bytes"]  # one member: the root
    uss = row["process_tree/0/uss_bytes"]
    assert 0 < uss <= row["process_tree/0/pss_bytes"] <= row["process_tree/0/rss_bytes"]
    exact("pid", row["process_tree/0/pid"], float(os.getpid()))
    assert not np.isnan(row["process_tree/0/num_threads"])


def test_pss_sums_saturate(tmp_path):
    # process_tree_ranges: 101's Pss is 10^20 kB (past 2^64 bytes: 2^64-1), 102's Private_Dirty 2^64-1 kB (its
    # USS saturates at 2^63-1); 100 holds Pss 40 kB, USS 40 kB; 101 USS 4 kB.
    tree = Tree("process_tree_ranges", tmp_path)
    s, _ = open_sampler(tree, process_tree=True, pid=100, process_tree_slots=3)
    row = s.sample()
    exact("pss_bytes", row["process_tree/pss_bytes"], 40 * KB + float(2**64 - 1) + 4 * KB)  # members in slot order
    exact("uss_bytes", row["process_tree/uss_bytes"], 40 * KB + 4 * KB + float(2**63 - 1))
    exact("1/pss_bytes", row["process_tree/1/pss_bytes"], float(2**64 - 1))


def test_record_writes_the_members_into_the_stop_event(tmp_path):
    import json
    import sys

    from cli_support import event, run_cli, series
    from test_cli_record import SPAWN_TWO_BUSY

    trace = tmp_path / "tree.json"
    proc = run_cli("record", "-q", "-o", trace, "--interval", "10ms", "--process-tree", "--process-tree-slots", "3",
                   "--", sys.executable, "-c", SPAWN_TWO_BUSY)
    assert proc.returncode == 0, proc.stderr
    events = json.loads(trace.read_text())
    root = event(events, "sysprof start")["args"]["pid"]
    members = event(events, "sysprof stop")["args"]["process_tree_members"]
    assert members[0]["slot"] == 0 and members[0]["pid"] == root
    kids = {m["pid"] for m in members if m["slot"] in (1, 2)}
    assert len(kids) == 2 and all(m["end_ns"] is not None for m in members if m["pid"] in kids), members
    s = series(events)
    assert {v for _, v in s["process_tree/0/pid"] if v is not None} == {float(root)}
    seen = {v for k in (1, 2) for _, v in s[f"process_tree/{k}/pid"] if v is not None}
    assert seen == {float(p) for p in kids}, (seen, kids)  # the trace names the same pids


def _sample_as(uid, pid):
    """In a forked child running as uid: both backends' first row and process_tree error, following pid."""
    out = {}
    for backend in ("native", "psutil"):
        s = sysprof.Sampler(backend=backend, capacity=64, cpu=False, memory=False, disk=False, net=False,
                            process_tree=True, process_tree_slots=1, pid=pid)
        row = s.sample()
        out[backend] = {"error": s.errors.get("process_tree", ""),
                        "row": {k: (None if math.isnan(v) else v) for k, v in row.items()}}
    return out


@needs_rollup
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to sample as another user")
def test_another_users_smaps_rollup_reads_nan_with_one_error():
    import json
    import subprocess

    if not sysprof.native_available()[0]:
        pytest.skip("native backend unavailable")
    pytest.importorskip("psutil")  # imported here: the child may not read the interpreter's files
    from sysprof.sampling.portable import host  # noqa: F401
    target = subprocess.Popen(["sleep", "60"])  # root's: its smaps_rollup refuses another user (EACCES)
    r, w = os.pipe()
    child = os.fork()
    if child == 0:  # no exec: the interpreter and sysprof are already loaded
        try:
            os.close(r)
            os.setgid(65534)
            os.setuid(65534)
            os.write(w, json.dumps(_sample_as(65534, target.pid)).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        data = f.read()
    os.waitpid(child, 0)
    target.kill()
    target.wait()
    got = json.loads(data)
    for backend, res in got.items():
        row = res["row"]
        assert row["process_tree/0/pid"] == target.pid, backend
        assert row["process_tree/0/pss_bytes"] is None and row["process_tree/pss_bytes"] is None, (backend, row)
        assert row["process_tree/0/rss_bytes"] > 0 and row["process_tree/num_processes"] == 1, (backend, row)
        assert "smaps_rollup" in res["error"] or "memory_full_info" in res["error"], (backend, res["error"])
