"""A row per sample (issue 27, item 2): a changes-only trace writes a counter only when it changed, and lists its
samples' times (`sysprof samples` events), so read_trace gives one row per sample, values held between changes;
read_trace(..., changes=True) gives the raw changes."""
from __future__ import annotations

import os

import numpy as np
import pytest

from cli_support import run_cli
from sysprof.report import TraceData
from sysprof.trace.load import load_events
from sysprof.trace.schema import SAMPLES_EVENT, sample_times_ns, samples_event

pd = pytest.importorskip("pandas")
from sysprof.frames import read_trace, trace_frame  # noqa: E402


def test_samples_event_round_trip():
    t = [1_700_000_000_123_456_789, 1_700_000_000_124_456_001, 1_700_000_000_126_000_000]
    us = samples_event(t, 7, 1_700_000_000_123_456, 1000)
    assert us["name"] == SAMPLES_EVENT and us["ph"] == "M" and us["pid"] == 7
    assert us["args"] == {"t0_us": 1_700_000_000_123_456, "dt_us": [1000, 1544]}
    assert sample_times_ns(us["args"]) == [x // 1000 * 1000 for x in t]  # whole µs, as the counters' ts
    ns = samples_event(t, 7, None, 1)
    assert sample_times_ns(ns["args"]) == t
    for bad in (None, [], {"t0_us": 1.5, "dt_us": [1]}, {"t0_us": 1, "dt_us": [-1]}, {"t0_us": 1, "dt_us": "x"},
                {"t0_ns": 1, "dt_ns": [True, None]}):
        assert sample_times_ns(bad) == []


def _events(stop=True):
    ev = [{"name": "sysprof start", "ph": "i", "s": "g", "ts": 1000, "pid": 1, "tid": 0, "args": {"interval_s": 1e-3}},
          samples_event([1000_000, 2000_000, 3000_000, 4000_000], 1, 1000, 1000),
          {"name": "memory", "ph": "C", "ts": 1000, "pid": 1, "tid": 0, "args": {"used_bytes": 5.0}},
          {"name": "memory", "ph": "C", "ts": 3000, "pid": 1, "tid": 0, "args": {"used_bytes": 7.0}},
          samples_event([5000_000, 6000_000], 1, 5000, 1000),
          {"name": "memory", "ph": "C", "ts": 6000, "pid": 1, "tid": 0, "args": {}},  # unknown from 6 ms
          {"name": "memory", "ph": "C", "ts": 7000, "pid": 1, "tid": 0, "args": {"used_bytes": 9.0}}]  # not listed
    if stop:
        ev.append({"name": "memory", "ph": "C", "ts": 7500, "pid": 1, "tid": 0, "args": {"used_bytes": 9.0}})
        ev.append({"name": "sysprof stop", "ph": "i", "s": "g", "ts": 7500, "pid": 1, "tid": 0, "args": {}})
    return ev


def test_a_row_per_listed_sample_values_held():
    df = trace_frame(TraceData(_events()))
    # six listed samples; the stop's end row and the unlisted 7 ms event are not samples of a closed trace
    assert (df.index.asi8 // 1000).tolist() == [1000, 2000, 3000, 4000, 5000, 6000]
    got = df["memory/used_bytes"].tolist()
    assert got[:5] == [5.0, 5.0, 7.0, 7.0, 7.0] and np.isnan(got[5])
    assert df["memory/used_bytes"].mean() == pytest.approx(31 / 5)  # by samples, not by changes (6.0)
    changes = trace_frame(TraceData(_events()), changes=True)
    assert (changes.index.asi8 // 1000).tolist() == [1000, 3000, 6000, 7000, 7500]


def test_a_trace_cut_short_keeps_the_events_after_the_last_listed_sample():
    df = trace_frame(TraceData(_events(stop=False)))
    assert (df.index.asi8 // 1000).tolist() == [1000, 2000, 3000, 4000, 5000, 6000, 7000]
    assert df["memory/used_bytes"].tolist()[-1] == 9.0


@pytest.mark.parametrize("suffix", [".json", ".json.gz", ".pftrace"])
@pytest.mark.parametrize("interval", ["10ms", "500us"])
def test_record_reads_back_a_row_per_sample(tmp_path, suffix, interval):
    if suffix == ".pftrace":
        pytest.importorskip("perfetto")
    trace = tmp_path / f"t{suffix}"
    proc = run_cli("record", "-q", "--load", "--memory", "--interval", interval, "--duration", "1s", "-o", trace,
                   timeout=120)
    assert proc.returncode == 0, proc.stderr
    df, changes = read_trace(trace), read_trace(trace, changes=True)
    data = TraceData(load_events(trace))
    written = data.stop["samples_written"]
    assert len(df) == written == data.sample_ns.size  # a row per sample written
    assert len(changes) <= len(df)
    assert df.index.is_monotonic_increasing and df.index.is_unique
    # each sample's values are those of the last change written at or before it (a change is written at a
    # sample's time; float µs of one ns time may round 0.25 µs apart, so it is matched to the nearest sample)
    at = df.index.get_indexer(changes.index, method="nearest")
    assert (np.diff(at) > 0).all()  # no two changes at one sample
    held = changes.set_axis(df.index[at]).reindex(df.index).ffill()
    pd.testing.assert_frame_equal(df, held, check_freq=False)


def test_export_a_row_per_sample_or_the_changes(tmp_path):
    trace = tmp_path / "t.json"
    assert run_cli("record", "-q", "--load", "--interval", "10ms", "--duration", "0.5s", "-o", trace).returncode == 0
    rows = run_cli("export", trace, "-o", "-", "-q").stdout.strip().splitlines()
    changes = run_cli("export", trace, "-o", "-", "-q", "--changes").stdout.strip().splitlines()
    written = TraceData(load_events(trace)).stop[
        "samples_written"]
    assert len(rows) - 1 == written and len(changes) <= len(rows)


def test_counter_events_at_impossible_times_are_left_out():
    ev = [{"name": "m", "ph": "C", "ts": t, "pid": 1, "tid": 0, "args": {"v": 1.0}}
          for t in (float("nan"), float("inf"), -1e300, 1e300)]
    ev.append({"name": "m", "ph": "C", "ts": 5, "pid": 1, "tid": 0, "args": {"v": 2.0}})
    df = trace_frame(TraceData(ev))
    assert (df.index.asi8 // 1000).tolist() == [5] and df["m/v"].tolist() == [2.0]
