"""The verdict (sysprof.report.verdict) on synthetic traces with known answers: a CPU-bound phase, an io-stalled
phase, an idle phase, memory trouble, no spans at all, and no bottleneck."""
from __future__ import annotations

import pytest

from sysprof.report import Span, TraceData
from sysprof.report.verdict import verdict

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
        "compute: 50 % of wall time; CPU busy 97 %; GPU util 95 % during it",
        "dataloader: 31 % of wall time; GPU util 4 % during it; disk read 180.00 MB/s, io stall share 0.42; "
        "CPU iowait 25 %; disk sda util 90 %",
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
                                      "swap: 25 % of wall time; major faults 500 /s; memory used 95 %"]


def test_a_trace_without_spans_is_one_phase_and_patterns_choose_phases():
    # no spans: the whole 2 s is one phase, CPU 95 % throughout
    d = trace([("all", 0, 2)], lambda name: {"cpu": {"percent": 95.0}}, spans=False)
    assert [x["text"] for x in verdict(d)] == ["(whole trace): 100 % of wall time; CPU busy 95 %"]
    # patterns: only the phases asked for
    d = trace([("compute", 0, 5), ("dataloader", 5, 8.1), ("sleep", 8.1, 10)], training)
    assert [x["phase"] for x in verdict(d, ["s*", "data*"])] == ["dataloader", "sleep"]


def test_a_span_over_the_whole_trace_is_no_phase_unless_asked_for():
    # one "fit" span over [0, 9.5 s) (95 % of the 10 s any span covers, >= 90 %, like Composer's event/fit) is the
    # run: left out of the automatic phases, so compute (50 %), dataloader (31 %) and sleep (19 %) are judged;
    # asked for by name, it is judged. Two "epoch" spans covering as much are a phase (ranked after compute).
    d = trace([("compute", 0, 5), ("dataloader", 5, 8.1), ("sleep", 8.1, 10)], training)
    d.spans.append(Span("fit", 0, 9.5 * S, 1, 9))
    assert [x["phase"] for x in verdict(d)] == ["compute", "dataloader", "sleep"]
    (fit,) = verdict(d, ["fit"])
    assert fit["share"] == pytest.approx(0.95) and fit["text"].startswith("fit: 95 % of wall time; ")
    d.spans += [Span("epoch", 0, 4.75 * S, 1, 8), Span("epoch", 4.75 * S, 9.5 * S, 1, 8)]
    assert [x["phase"] for x in verdict(d)] == ["epoch", "compute", "dataloader", "sleep"]
