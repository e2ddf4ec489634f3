"""The verdict (sysprof.report.verdict) on synthetic traces with known answers: a CPU-bound phase, an io-stalled
phase, an idle phase, memory trouble, no spans at all, and no bottleneck; the followed job and each cause of its
not running (a CPU taken by other processes, a cgroup's CPU limit, steal, its own threads, pinning, paging, disk
I/O, sleep); nested phases and the time outside every span."""
from __future__ import annotations

import pytest

from sysprof.report import Span, TraceData
from sysprof.report.verdict import judge_job, judgement, verdict

S = 1_000_000


def trace(phases, channels_of, spans=True, step_s=0.1):
    """A recorded trace sampled every `step_s` from 0 to the last phase's end; phases = [(name, start_s, end_s)];
    channels_of(name) -> {group: {key: value}} sampled while that phase runs. Spans as B/E pairs."""
    end = phases[-1][2]
    ev = [{"name": "sysprof start", "ph": "i", "ts": 0, "pid": 1, "tid": 0, "args": {"interval_s": step_s}}]
    n = round(end / step_s)
    for i in range(n):
        t = round(i * step_s * S)
        name = next(p for p, a, b in phases if a * S <= t < b * S)
        for group, args in channels_of(name).items():
            ev.append({"name": group, "ph": "C", "ts": t, "pid": 1, "tid": 0, "args": args})
    if spans:
        for name, a, b in phases:
            ev.append({"name": name, "ph": "B", "ts": round(a * S), "pid": 1, "tid": 5})
            ev.append({"name": name, "ph": "E", "ts": round(b * S), "pid": 1, "tid": 5})
    ev.append({"name": "sysprof stop", "ph": "i", "ts": round(end * S), "pid": 1, "tid": 0, "args": {}})
    return TraceData(ev)


def training(name):
    """compute: CPU pegged, GPU busy. dataloader: GPU starved, io stalled, disk busy reading 180 MB/s.
    sleep: everything idle. loop0 always 100 % busy: not a disk, never reported."""
    cpu, iowait, stall, busy, read, gpu = {"compute": (97.0, 0.0, 0.0, 0.05, 1e6, 95.0),
                                           "dataloader": (30.0, 25.0, 0.42, 0.9, 180e6, 4.0),
                                           "sleep": (2.0, 0.0, 0.0, 0.0, 0.0, 50.0)}[name]
    return {"cpu": {"percent": cpu, "iowait_percent": iowait},
            "pressure/io": {"some_seconds_per_second": stall},
            "disk/sda": {"busy_time_seconds_per_second": busy, "read_bytes_per_second": read,
                         "write_bytes_per_second": 0.0},
            "disk/loop0": {"busy_time_seconds_per_second": 1.0},
            "gpu/0": {"utilization_percent": gpu}, "gpu/1": {"utilization_percent": gpu}}


def test_cpu_bound_io_stalled_and_idle_phases():
    # 10 s: compute [0, 5) 50 %, dataloader [5, 8.1) 31 %, sleep [8.1, 10) 19 % of the sampled time.
    # compute: CPU 97 >= 90 (severity 97/90 = 1.08) and GPU 95 >= 90 (1.06). dataloader: GPU 4 <= 30
    # (30/4 = 7.5), io stall 0.42 >= 0.10 (4.2), iowait 25 >= 10 (2.5), sda 0.9 >= 0.8 (1.125), in that order;
    # the disks' read throughput joins the first io finding. sleep: GPU 50 % and CPU 2 %: nothing fires.
    v = verdict(trace([("compute", 0, 5), ("dataloader", 5, 8.1), ("sleep", 8.1, 10)], training))
    assert [x["text"] for x in v] == [
        "compute: 50 % of wall time; the CPUs were busy 97 % of the time; the GPUs were busy 95 % of the time",
        "dataloader: 31 % of wall time; the GPUs were busy only 4 % of the time; the disks reading 180.00 MB/s, "
        "some task waited for I/O 42 % of the time (PSI); the CPUs idled waiting for I/O 25 % of the time (iowait); "
        "disk sda busy 90 % of the time",
        "sleep: 19 % of wall time; no clear bottleneck",
    ]
    compute, loader, sleep = v
    assert compute["share"] == pytest.approx(0.5) and compute["wall_seconds"] == pytest.approx(5.0)
    assert [f["rule"] for f in loader["findings"]] == ["gpu_starved", "io_stall", "cpu_iowait", "disk_busy"]
    gpu = loader["findings"][0]
    assert (gpu["value"], gpu["threshold"], gpu["state"], gpu["severity"]) == (
        pytest.approx(4.0), 30.0, "starved", pytest.approx(7.5))
    assert gpu["channel"] == "gpu/*/utilization_percent"  # the mean of the two GPUs
    assert loader["findings"][3]["channel"] == "disk/sda/busy_time_seconds_per_second"  # loop0 is no disk
    assert compute["findings"][0]["state"] == "saturated" and sleep["findings"] == []


def test_memory_trouble_and_no_bottleneck():
    # swap [0, 2): memory 95 % used (95/90 = 1.06), 500 major faults/s (500/100 = 5): faults first.
    # idle [2, 8): 2 % CPU, no GPU in the trace: no clear bottleneck. Shares 25 % and 75 %, largest first.
    def channels(name):
        used, faults = (95.0, 500.0) if name == "swap" else (40.0, 0.0)
        return {"cpu": {"percent": 2.0}, "memory": {"used_percent": used},
                "vmstat": {"pgmajfault_per_second": faults}}

    v = verdict(trace([("swap", 0, 2), ("idle", 2, 8)], channels))
    assert [x["text"] for x in v] == ["idle: 75 % of wall time; no clear bottleneck",
                                      "swap: 25 % of wall time; 500 major page faults a second, all processes (pages "
                                      "read back from disk); memory 95 % used"]


def test_a_trace_without_spans_is_one_phase_and_patterns_choose_phases():
    # no spans: the whole 2 s is one phase, CPU 95 % throughout
    d = trace([("all", 0, 2)], lambda name: {"cpu": {"percent": 95.0}}, spans=False)
    assert [x["text"] for x in verdict(d)] == ["(whole trace): 100 % of wall time; the CPUs were busy 95 % of the time"]
    # patterns: only the phases asked for
    d = trace([("compute", 0, 5), ("dataloader", 5, 8.1), ("sleep", 8.1, 10)], training)
    assert [x["phase"] for x in verdict(d, ["s*", "data*"])] == ["dataloader", "sleep"]


def test_a_span_over_the_whole_trace_is_no_phase_unless_asked_for():
    # one "fit" span over [0, 9.5 s) (95 % of the 10 s any span covers, >= 90 %, like Composer's event/fit) is the
    # run: left out of the automatic phases, so compute (50 %), dataloader (31 %) and sleep (19 %) are judged;
    # asked for by name, it is judged. Two "epoch" spans covering as much are a phase, holding compute and
    # dataloader (all of their time is inside it), not sleep (1.4 of its 1.9 s).
    d = trace([("compute", 0, 5), ("dataloader", 5, 8.1), ("sleep", 8.1, 10)], training)
    d.spans.append(Span("fit", 0, 9.5 * S, 1, 9))
    assert [x["phase"] for x in verdict(d)] == ["compute", "dataloader", "sleep"]
    (fit,) = verdict(d, ["fit"])
    assert fit["share"] == pytest.approx(0.95) and fit["text"].startswith("fit: 95 % of wall time; ")
    d.spans += [Span("epoch", 0, 4.75 * S, 1, 8), Span("epoch", 4.75 * S, 9.5 * S, 1, 8)]
    v = verdict(d)
    assert [(x["phase"], x["parent"], x["depth"]) for x in v] == [
        ("epoch", None, 0), ("compute", "epoch", 1), ("dataloader", "epoch", 1), ("sleep", None, 0)]
    assert v[1]["parent_share"] == pytest.approx(5 / 9.5) and v[1]["text"].startswith("compute: 53 % of epoch (50 % of")


# --------------------------------------------------------------------------------------------------
# the job: the followed process tree over the whole recording, and why it did not run more
# --------------------------------------------------------------------------------------------------
def job_trace(cores, waiting=None, blocked=0.0, busy=None, steal=0.0, threads=1, faults=None, cgroup=None,
              disk_write=0.0, seconds=10.0, step_s=0.1, cpus=2, spans=(), processes=3.0, sleeping=0.0):
    """A recorded trace of a followed job: its counters grow at `cores` CPU-seconds, `waiting` run-delay seconds
    (None: not recorded, as the psutil backend) and `faults` major faults per second of wall time; `busy` and
    `steal` percent of the machine's `cpus`; `cgroup`: {key: value or rate} of the cgroup group; `blocked` and
    `sleeping`: the average count of its `processes` in states D and S."""
    ev = [{"name": "sysprof start", "ph": "i", "ts": 0, "pid": 1, "tid": 0,
           "args": {"interval_s": step_s, "cpu_count": cpus, "command_line": "python train.py --fast", "pid": 4242}}]
    for i in range(round(seconds / step_s) + 1):  # a last sample at the stop: the counters' last step is in
        t = i * step_s
        tree = {"num_processes": processes, "num_threads": float(threads), "cpu_percent": 100 * cores,
                "cpu_seconds_total": 5.0 + cores * t, "procs_blocked": blocked, "procs_sleeping": sleeping}
        if waiting is not None:
            tree.update(run_delay_seconds_total=waiting * t, run_delay_seconds_per_second=waiting)
        if faults is not None:
            tree.update(majflt_total=faults * t, majflt_per_second=faults)
        ts = round(t * S)
        ev.append({"name": "process_tree", "ph": "C", "ts": ts, "pid": 4242, "tid": 0, "args": tree})
        if busy is not None:
            ev.append({"name": "cpu", "ph": "C", "ts": ts, "pid": 1, "tid": 0,
                       "args": {"percent": busy, "steal_percent": steal}})
        ev.append({"name": "disk/vda", "ph": "C", "ts": ts, "pid": 1, "tid": 0,
                   "args": {"write_bytes_per_second": disk_write, "busy_time_seconds_per_second": 0.5}})
        if cgroup:
            ev.append({"name": "cgroup", "ph": "C", "ts": ts, "pid": 1, "tid": 0,
                       "args": {k: (v * t if k.endswith("_total") else v) for k, v in cgroup.items()}})
    for name, a, b in spans:
        ev.append({"name": name, "ph": "X", "ts": round(a * S), "dur": round((b - a) * S), "pid": 4242, "tid": 1})
    ev.append({"name": "sysprof stop", "ph": "i", "ts": round(seconds * S), "pid": 1, "tid": 0, "args": {}})
    return TraceData(ev)


def test_a_job_held_back_by_other_processes():
    # the case: the job got 6 % of one core, its thread waited for a CPU 60 % of the time, and the 2 CPUs
    # were all busy: 2 - 0.06 = 1.94 cores went to other processes
    j = judge_job(job_trace(0.06, waiting=0.6, busy=100.0))
    assert j["cause"] == "cpu_contention"
    assert (j["cores"], j["waiting"], j["others"]) == (pytest.approx(0.06), pytest.approx(0.6), pytest.approx(1.94))
    assert j["text"] == ("job (python train.py --fast, pid 4242, up to 3 processes): used 6 % of one core; waited "
                         "for a CPU 60 % of the wall time (run delay); other processes used 1.9 of the 2 CPUs. Held "
                         "back by other processes: they had the CPUs while it waited.")


@pytest.mark.parametrize("kw, cause, words", [
    # a cgroup CPU limit of 0.5 cores, throttled in 8 of 10 periods a second
    (dict(cores=0.5, waiting=0.5, busy=25.0, cgroup={"cpu_periods_total": 10.0, "cpu_throttled_periods_total": 8.0,
                                                     "cpu_limit_cores": 0.5}),
     "cpu_throttled", "Held back by its cgroup's CPU limit (0.5 cores): throttled in 80 % of the limit's periods."),
    # steal took 40 % of 2 CPUs (0.8 cores); other processes (60 - 40) % of 2 less the job's 0.5: 0
    (dict(cores=0.5, waiting=0.4, busy=60.0, steal=40.0), "cpu_steal",
     "Held back by the hypervisor, which took 40 % of the CPUs' time (steal)."),
    # steal took 10 % (0.2 cores), other processes (90 - 10) % of 2 less 0.5: 1.1 cores, the larger taker
    (dict(cores=0.5, waiting=0.4, busy=90.0, steal=10.0), "cpu_contention", "Held back by other processes"),
    # 4 busy threads on 2 CPUs: 1.9 cores, 2.1 s of run delay a second, summed over the threads
    (dict(cores=1.9, waiting=2.1, busy=97.0, threads=4), "own_threads", "Its own threads outnumbered the 2 CPUs."),
    (dict(cores=0.5, waiting=0.5, busy=25.0), "cpu_pinned", "The CPUs were not all busy"),
    # 500 major faults a second, its cgroup at 62 of 64 MB
    (dict(cores=0.2, waiting=0.01, blocked=0.6, faults=500.0, busy=20.0,
          cgroup={"memory_current_bytes": 62e6, "memory_max_bytes": 64e6}), "memory_paging",
     "Its memory was read back from disk (major page faults): its cgroup is at its memory limit (62.00 MB of "
     "64.00 MB)."),
    (dict(cores=0.05, waiting=0.01, blocked=0.7, busy=10.0, disk_write=40e6), "disk_io",
     "Waiting for the disk (the disks writing 40.00 MB/s)."),
    (dict(cores=0.02, waiting=0.01, busy=10.0), "asleep", "Mostly asleep: its main thread was off the CPU, not "
     "waiting for one and not in disk I/O at least 97 % of the time, waiting on something else"),
    (dict(cores=0.98, waiting=0.01, busy=50.0), "cpu_bound", "Busy on the CPU (CPU-bound)."),
])
def test_each_cause_is_named_with_its_number(kw, cause, words):
    j = judge_job(job_trace(**kw))
    assert j["cause"] == cause, j["text"]
    assert words in j["text"], j["text"]


def test_a_job_without_run_delay_says_so_and_no_job_is_said():
    j = judge_job(job_trace(0.3, waiting=None, busy=50.0))  # the psutil backend: no run delay
    assert j["waiting"] is None and j["cause"] is None
    assert "its wait for a CPU was not recorded" in j["text"]
    d = trace([("all", 0, 2)], lambda name: {"cpu": {"percent": 95.0}}, spans=False)
    assert judge_job(d) is None
    assert judgement(d)["lines"][0].startswith("job: not followed (record a command, or --pid PID")


def test_nested_phases_are_parts_of_their_parent_and_the_time_outside_is_said():
    # 10 s: 7 train_batch spans [k, k + 1) for k in 0..6, a backward [k + 0.5, k + 0.9) inside each, a dataloader
    # [7, 8.5); 1.5 s outside every span. backward: 2.8 s = 40 % of train_batch's 7 s (28 % of the wall time),
    # shown under it; the job's CPU in each phase from its counters (0.95 cores throughout).
    spans = [("train_batch", k, k + 1) for k in range(7)] + [("backward", k + 0.5, k + 0.9) for k in range(7)]
    spans.append(("dataloader", 7, 8.5))
    v = judgement(job_trace(0.95, waiting=0.0, busy=60.0, spans=spans))
    assert v["lines"][1:] == [
        "train_batch: 70 % of wall time; the job used 95 % of one core; no clear bottleneck",
        "  backward: 40 % of train_batch (28 % of wall time); the job used 95 % of one core; no clear bottleneck",
        "dataloader: 15 % of wall time; the job used 95 % of one core; no clear bottleneck",
        "outside every span: 15 % of wall time; the job used 95 % of one core; no clear bottleneck",
    ]
    assert v["outside"]["share"] == pytest.approx(0.15) and v["outside"]["sampled_seconds"] == pytest.approx(1.5)
    backward = v["phases"][1]
    assert (backward["parent"], backward["parent_share"], backward["share"]) == (
        "train_batch", pytest.approx(0.4), pytest.approx(0.28))


def test_a_wait_over_one_second_a_second_is_said_summed_over_the_threads():
    # 4 busy threads on 2 CPUs: 2.1 s of run delay each second of wall time, summed over the threads
    v = judgement(job_trace(1.9, waiting=2.1, busy=97.0, threads=4))
    assert "used 1.9 cores; waited for a CPU 2.1 s per second of wall time, summed over its threads (run delay)" \
        in v["job"]["text"]
    (whole,) = v["phases"]
    assert "the job waited for a CPU 2.1 s per second of wall time, summed over its threads" in whole["text"]


@pytest.mark.parametrize("blocked, sleeping, disk", [(0.9, 0.1, 0.81), (0.3, 0.0, 0.9), (0.0, 0.6, 0.0)])
def test_one_process_splits_its_exact_time_off_the_cpu_by_its_states_samples(blocked, sleeping, disk):
    # one process: 10 % of one core, no run delay, so its main thread was off the CPU 90 % of the wall time
    # (exactly); the samples of its state split that time: D 9 of 10 samples asleep -> 81 %; D the only sleep seen
    # -> all 90 %, however few the samples that caught it; S only -> asleep 90 %
    j = judge_job(job_trace(0.1, waiting=0.0, blocked=blocked, sleeping=sleeping, busy=30.0, processes=1.0))
    assert (j["disk"], j["asleep"]) == (pytest.approx(disk), pytest.approx(0.9 - disk))
    assert j["cause"] == ("asleep" if disk == 0 else "disk_io")
    if disk:
        assert f"in disk I/O {100 * disk:.0f} % of the wall time" in j["text"]
