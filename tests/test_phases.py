"""Phase attribution (sysprof.report.phases, `report --by`, sysprof.by_phase) on synthetic traces with answers
worked out by hand: samples split at span edges, totals' increases, overlapping and nested spans, units of the
amounts, Composer-named traces mapped back to the sampler's channels, sampling windows."""
from __future__ import annotations

import pytest

from sysprof.report import ReportError, TraceData
from sysprof.trace.composer import sampler_channel as _inverse, sampler_channels
from sysprof.report.phases import amount_rule, by_phase, no_match_message, phases_frame, phases_json, whole_trace
from sysprof.trace.schema import samples_event

S = 1_000_000  # µs per second


def recorded(counters, spans=(), interval_s=0.2, cpu_count=None, stop_s=1.0, rows_s=None):
    """A `sysprof record`-like trace: counters = [(group, ts_s, {key: value})], spans = [(name, start_s, end_s,
    tid)] as X events; ``rows_s``: the sample times its samples event lists (none by default)."""
    meta = {"interval_s": interval_s}
    if cpu_count:
        meta["cpu_count"] = cpu_count
    ev = [{"name": "sysprof start", "ph": "i", "ts": 0, "pid": 1, "tid": 0, "args": meta}]
    if rows_s:
        ev.append(samples_event([round(t * S) * 1000 for t in rows_s], 1, 0, 1000))
    ev += [{"name": g, "ph": "C", "ts": round(t * S), "pid": 1, "tid": 0, "args": a} for g, t, a in counters]
    ev += [{"name": n, "ph": "X", "ts": round(a * S), "dur": round((b - a) * S), "pid": 1, "tid": tid}
           for n, a, b, tid in spans]
    ev.append({"name": "sysprof stop", "ph": "i", "ts": round(stop_s * S), "pid": 1, "tid": 0, "args": {}})
    return TraceData(ev)


def one(phases, name):
    (p,) = [p for p in phases if p.name == name]
    return p


def test_samples_straddling_a_span_edge_are_split_by_time():
    # samples at 0, 0.2, 0.4 s (interval 0.2 s); the span [0.10, 0.35) takes 0.10 s of the first value and 0.15 s
    # of the second: a constant 1000 B/s rate -> 1000 x 0.25 = 250 B; cpu 10 % then 50 % -> mean
    # (10 x 0.10 + 50 x 0.15) / 0.25 = 34 %, and with 4 CPUs 0.34 x 0.25 s x 4 = 0.34 CPU-seconds;
    # the total read_bytes 0 -> 200000 -> 400000: each step accrues over the interval before its sample, so
    # [0.10, 0.20) holds half the first step and [0.20, 0.35) three quarters of the second: 250000 B
    counters = []
    for i, t in enumerate((0.0, 0.2, 0.4)):
        counters.append(("disk/sda", t, {"read_bytes_per_second": 1000.0, "read_bytes": 200000.0 * i}))
        counters.append(("cpu", t, {"percent": (10.0, 50.0, 90.0)[i]}))
    d = recorded(counters, [("load", 0.10, 0.35, 1)], cpu_count=4)
    (p,) = by_phase(d, "load")
    assert (p.name, p.count) == ("load", 1)
    assert p.duration_seconds == pytest.approx(0.25) and p.wall_seconds == pytest.approx(0.25)
    rate = p.channels["disk/sda/read_bytes_per_second"]
    assert (rate.mean, rate.amount, rate.unit, rate.amount_unit) == (pytest.approx(1000), pytest.approx(250), "B/s", "B")
    cpu = p.channels["cpu/percent"]
    assert cpu.mean == pytest.approx(34) and cpu.amount == pytest.approx(0.34) and cpu.amount_unit == "s"
    total = p.channels["disk/sda/read_bytes"]
    assert total.amount == pytest.approx(250000) and total.amount_unit == "B"


def test_a_changes_only_total_accrues_over_one_interval_and_a_reset_adds_nothing():
    # interval 0.1 s; the total is written only when it changed: 0 at 0 s, 1000 at 1.0 s, so the 1000 accrued in
    # [0.9, 1.0): a span [0.5, 0.95) gets half of it (500), a span [0, 0.5) none; then 1000 -> 100 at 1.1 s is
    # a reset (no increase) and 100 -> 400 at 1.2 s accrues 300 in [1.1, 1.2)
    counters = [("vmstat", t, {"pgmajfault_total": v}) for t, v in ((0.0, 0.0), (1.0, 1000.0), (1.1, 100.0),
                                                                    (1.2, 400.0))]
    d = recorded(counters, [("late", 0.5, 0.95, 1), ("early", 0.0, 0.5, 1), ("after", 1.0, 1.3, 1)],
                 interval_s=0.1, stop_s=1.3)
    got = {p.name: p.channels["vmstat/pgmajfault_total"].amount for p in by_phase(d, "*")}
    assert got == {"early": 0.0, "late": pytest.approx(500), "after": pytest.approx(300)}
    assert by_phase(d, "late")[0].channels["vmstat/pgmajfault_total"].amount_unit == ""


def test_a_late_row_carries_its_whole_gap_where_the_trace_lists_its_rows():
    # interval 0.1 s, rows at 0, 0.1, 0.2 and 0.5 s (the sampler late: no row at 0.3, 0.4), listed by the samples
    # event; a counter of 100 a 0.1 s: the 300 shown at 0.5 s accrued over [0.2, 0.5), so a span [0.2, 0.35) gets
    # 150 (over one interval, [0.4, 0.5), it would get none and [0.4, 0.5) all 300)
    counters = [("vmstat", t, {"pgmajfault_total": v}) for t, v in ((0.0, 0.0), (0.1, 100.0), (0.2, 200.0),
                                                                    (0.5, 500.0))]
    d = recorded(counters, [("mid", 0.2, 0.35, 1), ("end", 0.4, 0.5, 1)], interval_s=0.1, stop_s=0.6,
                 rows_s=[0.0, 0.1, 0.2, 0.5])
    got = {p.name: p.channels["vmstat/pgmajfault_total"].amount for p in by_phase(d, "*")}
    assert got == {"mid": pytest.approx(150), "end": pytest.approx(100)}


def test_overlapping_spans_of_one_name_are_unioned_and_nested_ones_attributed_to_both():
    # 1000 B/s from 0 to 1 s (one sample every 0.1 s). "step" on two threads: [0, 0.3) and [0.2, 0.4):
    # count 2, duration 0.3 + 0.2 = 0.5 s, union 0.4 s -> 400 B (not 500). "batch" [0.5, 0.9) holds
    # "dataloader" [0.6, 0.7): batch gets 400 B and dataloader 100 B, the overlap counted in both.
    counters = [("net/eth0", i / 10, {"bytes_recv_per_second": 1000.0}) for i in range(10)]
    d = recorded(counters, [("step", 0.0, 0.3, 1), ("step", 0.2, 0.4, 2), ("batch", 0.5, 0.9, 1),
                            ("dataloader", 0.6, 0.7, 1)], interval_s=0.1)
    phases = by_phase(d, ["step", "batch", "data*", "*loader"])
    assert [p.name for p in phases] == ["step", "batch", "dataloader"]  # pattern order; dataloader once
    step = one(phases, "step")
    assert (step.count, step.duration_seconds, step.wall_seconds) == (2, pytest.approx(0.5), pytest.approx(0.4))
    assert step.mean_seconds == pytest.approx(0.25)
    assert step.channels["net/eth0/bytes_recv_per_second"].amount == pytest.approx(400)
    assert one(phases, "batch").channels["net/eth0/bytes_recv_per_second"].amount == pytest.approx(400)
    assert one(phases, "dataloader").channels["net/eth0/bytes_recv_per_second"].amount == pytest.approx(100)
    assert one(phases, "dataloader").count == 1


def test_unknown_values_count_for_nothing_and_units_of_amounts():
    # gpu/0 every 0.1 s from 0 to 0.9 s; power 100 W, but unknown (key missing) at 0.2 and 0.3 s; the span
    # [0.1, 0.5) has power for 0.2 s only: mean 100 W, 100 W x 0.2 s = 20 J. temperature 60 °C: no amount.
    # utilization 50 % over the whole 0.4 s: 0.5 x 0.4 = 0.2 s busy. memory in use (bytes): no amount.
    counters = []
    for i in range(10):
        args = {"temperature_celsius": 60.0, "utilization_percent": 50.0}
        if i not in (2, 3):
            args["power_watts"] = 100.0
        counters.append(("gpu/0", i / 10, args))
        counters.append(("memory", i / 10, {"used_bytes": 4e9}))
    counters.append(("other", 0.0, {"never": float("nan")}))
    d = recorded(counters, [("fwd", 0.1, 0.5, 1)], interval_s=0.1)
    ch = by_phase(d, "fwd")[0].channels
    power = ch["gpu/0/power_watts"]
    assert (power.mean, power.amount, power.amount_unit, power.seconds) == (
        pytest.approx(100), pytest.approx(20), "J", pytest.approx(0.2))
    temp = ch["gpu/0/temperature_celsius"]
    assert (temp.mean, temp.amount, temp.unit, temp.amount_unit) == (pytest.approx(60), None, "\u00b0C", None)
    assert ch["gpu/0/utilization_percent"].amount == pytest.approx(0.2)
    assert ch["memory/used_bytes"].amount is None and ch["memory/used_bytes"].mean == pytest.approx(4e9)
    assert "other/never" not in ch  # no value inside the phase: left out


def test_amount_rules():
    assert amount_rule("pressure/io/some_seconds_per_second", "s/s") == ("integral", 1.0, "s")
    assert amount_rule("vmstat/pgmajfault_per_second", "/s") == ("integral", 1.0, "")
    assert amount_rule("process_tree/cpu_percent", "%") == ("integral", 0.01, "s")
    assert amount_rule("cpu/3/percent", "%") == ("integral", 0.01, "s")
    assert amount_rule("cpu/iowait_percent", "%", cpu_count=8) == ("integral", 0.08, "s")
    assert amount_rule("cpu/percent", "%") == (None, None, None)  # no cpu_count: CPU-seconds unknown
    assert amount_rule("pressure/io/some_avg10_percent", "%") == (None, None, None)
    assert amount_rule("gpu/0/energy_joules", "J") == ("increase", 1.0, "J")
    assert amount_rule("cgroup/cpu_usage_seconds_total", "s") == ("increase", 1.0, "s")
    assert amount_rule("myapp/tokens_per_second", "/s") == ("integral", 1.0, "")  # foreign: a rate by its unit
    assert amount_rule("myapp/queue", "") == (None, None, None)


def composer(windows=((0.0, 50), (5.0, 50)), spacing_s=0.01, spans=()):
    """Composer's layout (no recording metadata): windows of rows every `spacing_s` starting at the given
    second; kb_recv_per_second 200 (200 kB/s), used_gb 1.5, read_time in cumulative ms (+2 ms a row)."""
    ev = [{"name": "process_name", "ph": "M", "pid": 0, "tid": 1, "args": {"name": "Rank 0"}}]
    row = 0
    for start, n in windows:
        for i in range(n):
            ts = round((start + i * spacing_s) * S)
            for name, args in (("memory/virtual", {"used_gb": 1.5}), ("disk/sda/read_time", {"read_time": 2.0 * row}),
                               ("network/eth0/kb_recv_per_second", {"kb_recv_per_second": 200.0}),
                               ("memory/cuda/current_allocated_mem", {"current_allocated_mem": 0.25})):
                ev.append({"name": name, "cat": "", "ph": "C", "ts": ts, "pid": 0, "tid": 1, "args": args})
            row += 1
    for name, a, b in spans:
        ev.append({"name": name, "ph": "B", "ts": round(a * S), "pid": 0, "tid": 1})
        ev.append({"name": name, "ph": "E", "ts": round(b * S), "pid": 0, "tid": 1})
    return TraceData(ev)


def test_a_composer_trace_is_mapped_back_to_the_sampler_names_and_gaps_hold_no_value():
    # windows [0, 0.5) and [5, 5.5) s, rows every 10 ms. "event/batch" [0.1, 0.3): 200 kB/s -> 200000 B/s x 0.2 s
    # = 40000 B; read_time +2 ms a row -> read_time_seconds +0.002 s per 10 ms: 0.04 s in 0.2 s.
    # "idle" [1, 4) lies in the gap between the windows: no values at all. "wide" [0.4, 5.1): only
    # [0.4, 0.5) and [5.0, 5.1) were sampled: 200000 x 0.2 = 40000 B. read_time: the steps shown by the rows
    # at 0.41 .. 0.49 s (9) and 5.01 .. 5.10 s (10) accrue inside; the step over the gap (shown at 5.0 s, accruing
    # over [4.99, 5.0), in no window) is not attributed: 0.002 x 19 = 0.038 s.
    d = composer(spans=(("event/batch", 0.1, 0.3), ("idle", 1.0, 4.0), ("wide", 0.4, 5.1)))
    phases = {p.name: p for p in by_phase(d, ["event/*", "idle", "wide"])}
    batch = phases["event/batch"].channels
    assert set(batch) == {"memory/used_bytes", "disk/sda/read_time_seconds", "net/eth0/bytes_recv_per_second",
                          "memory/cuda/current_allocated_mem"}
    assert batch["memory/used_bytes"].mean == pytest.approx(1.5e9) and batch["memory/used_bytes"].unit == "B"
    net = batch["net/eth0/bytes_recv_per_second"]
    assert (net.mean, net.amount, net.unit, net.amount_unit) == (pytest.approx(2e5), pytest.approx(40000), "B/s", "B")
    rt = batch["disk/sda/read_time_seconds"]
    assert rt.unit == "s" and rt.amount == pytest.approx(0.04)
    assert batch["memory/cuda/current_allocated_mem"].unit == "GB"  # no sampler channel: kept as traced
    assert phases["idle"].channels == {} and phases["idle"].wall_seconds == pytest.approx(3.0)
    assert phases["wide"].wall_seconds == pytest.approx(4.7) and phases["wide"].sampled_seconds == pytest.approx(0.2)
    wide = phases["wide"].channels
    assert wide["net/eth0/bytes_recv_per_second"].amount == pytest.approx(40000)
    assert wide["net/eth0/bytes_recv_per_second"].seconds == pytest.approx(0.2)
    assert wide["disk/sda/read_time_seconds"].amount == pytest.approx(0.038)


def sampler_channel(ch):
    """(sampler channel, factor: the sampler's value over the trace's) of a Composer-layout channel, or None."""
    hit = _inverse(ch)
    return hit and (hit[0], hit[1] / hit[2])


def test_sampler_channel_inverts_composer_names():
    assert sampler_channel("memory/virtual/used_gb") == ("memory/used_bytes", 1e9)
    assert sampler_channel("disk/nvme0n1/busy_percent") == ("disk/nvme0n1/busy_time_seconds_per_second", 0.01)
    assert sampler_channel("disk/sda/write_count_per_second") == ("disk/sda/write_count_per_second", 1.0)
    assert sampler_channel("network/eth0/kb_sent") == ("net/eth0/bytes_sent", 1000.0)
    assert sampler_channel("process/memory/rss_gb") == ("process/rss_bytes", 1e9)
    assert sampler_channel("cpu/7/cpu_percent") == ("cpu/7/percent", 1.0)
    assert sampler_channels(["pressure/io/some_seconds_per_second"]) == {}  # a sysprof name already


def test_whole_trace_json_shape_and_no_match():
    counters = [("cpu", i / 10, {"percent": 20.0}) for i in range(10)]
    d = recorded(counters, [("a", 0.0, 0.5, 1)], interval_s=0.1)
    w = whole_trace(d)
    assert (w.count, w.wall_seconds) == (1, pytest.approx(1.0)) and w.channels["cpu/percent"].mean == pytest.approx(20)
    assert phases_json(by_phase(d, "a")) == [{"name": "a", "count": 1, "duration_seconds": pytest.approx(0.5),
                                              "channels": {"cpu/percent": {"mean": pytest.approx(20), "amount": None,
                                                                           "unit": "%"}}}]
    assert by_phase(d, "nomatch") == []
    assert no_match_message(d, ["x*"]) == "no span matches 'x*'; span names in the trace: a"
    assert "no duration events" in no_match_message(recorded(counters), ["x"])


def test_by_phase_dataframe(tmp_path):
    pd = pytest.importorskip("pandas")
    import json

    import sysprof

    counters = [("disk/sda", i / 10, {"write_bytes_per_second": 1000.0 * i}) for i in range(10)]
    d = recorded(counters, [("ckpt", 0.25, 0.45, 1), ("ckpt", 0.65, 0.75, 1)], interval_s=0.1)
    df = sysprof.by_phase(d, ["ckpt"])
    assert list(df.index.names) == ["phase", "channel"]
    row = df.loc[("ckpt", "disk/sda/write_bytes_per_second")]
    # 2000 B/s for 0.05 s + 3000 for 0.1 + 4000 for 0.05 = 600 B; 6000 for 0.05 + 7000 for 0.05 = 650 B
    assert row["amount"] == pytest.approx(1250) and row["amount_unit"] == "B" and row["count"] == 2
    assert row["mean"] == pytest.approx(1250 / 0.3) and row["duration_seconds"] == pytest.approx(0.3)
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [
        {"name": "disk/sda", "ph": "C", "ts": i * 100000, "args": {"write_bytes_per_second": 5.0}} for i in range(5)]
        + [{"name": "ckpt", "ph": "X", "ts": 0, "dur": 200000}]}))
    assert sysprof.by_phase(str(path), "ckpt").loc["ckpt"]["amount"].tolist() == [pytest.approx(1.0)]
    with pytest.raises(ReportError, match="span names in the trace: ckpt"):
        sysprof.by_phase(str(path), "nope")
    assert isinstance(phases_frame(d, "ckpt"), pd.DataFrame)


def test_by_phase_without_pandas_names_the_extra(monkeypatch):
    import sys

    import sysprof

    monkeypatch.setitem(sys.modules, "pandas", None)
    d = recorded([("cpu", 0.0, {"percent": 1.0})], [("a", 0.0, 0.1, 1)])
    with pytest.raises(ImportError, match=r"pip install sysprof\[pandas\]"):
        sysprof.by_phase(d, "a")
