"""Values at the time they were true (issue 27.6): a GPU's values reach a row from the reader thread up to an
interval + 250 ms late, so every trace writer stamps a GPU track with its ``reading_time_seconds`` instead of the
row's time, and ``--by`` attributes by it. Synthetic batches with known reading times and answers worked out by hand;
the live reading time is checked against the wall clock around the read in tests/test_gpu.py."""
from __future__ import annotations

import json

import numpy as np
import pytest

from sysprof.profiler.system_streams import ChangedEvents
from sysprof.report import TraceData
from sysprof.report.phases import by_phase
from sysprof.sampling.rows import Batch
from sysprof.trace.chrome import encode_event
from sysprof.trace.gpu_events import XidInstants
from sysprof.trace.schema import READING_TIME_SPAN_NS, reading_times_ns
from sysprof.trace.tracks import EventBuilder, RowTemplate, TrackLayout

MS = 1_000_000  # ns
T0 = 1_700_000_000 * 10**9  # a wall-clock origin (ns)
CHANNELS = ("cpu/percent", "gpu/0/energy_joules", "gpu/0/power_watts", "gpu/0/reading_time_seconds")


def lagged(n_rows=200, lag_ms=7, period_ms=10, energy=lambda k: float(min(k, 10))):
    """Rows every 1 ms from T0; the GPU is read every ``period_ms`` (reading k at T0 + k x period) and a row finds
    the reading ``lag_ms`` old or more: row r (at r ms) holds reading k = (r - lag) // period, NaN before the first.
    Energy ``energy(k)`` J, power 100 + k W; cpu/percent is r % 3 (changes every row)."""
    t = T0 + np.arange(n_rows, dtype=np.int64) * MS
    v = np.full((n_rows, len(CHANNELS)), np.nan)
    v[:, 0] = np.arange(n_rows) % 3
    for r in range(n_rows):
        k = (r - lag_ms) // period_ms
        if k >= 0:
            v[r, 1:] = energy(k), 100.0 + k, (T0 + k * period_ms * MS) / 1e9
    return Batch(t, v, CHANNELS, 0.001)


def gpu_events(events):
    return [e for e in events if e["name"] == "gpu/0"]


def test_the_layout_takes_the_reading_time_out_of_the_keys():
    layout = TrackLayout(CHANNELS, "sysprof")
    (gpu,) = [t for t in layout.tracks if t.name == "gpu/0"]
    assert gpu.keys == ("energy_joules", "power_watts") and gpu.columns == [1, 2] and gpu.time_column == 3
    assert layout.timed == [(1, 3)]
    assert "gpu/0/reading_time_seconds" not in layout.units
    # Composer's layout has a track per GPU channel, each timed by its device's reading time; none for the time
    composer = TrackLayout(CHANNELS, "composer")
    assert [(t.name, t.keys, t.time_column) for t in composer.tracks] == [
        ("cpu", ("cpu_percent",), None), ("gpu/0/energy_joules", ("energy_joules",), 3),
        ("gpu/0/power_watts", ("power_watts",), 3)]


def test_reading_times_are_clamped_to_the_row_and_fall_back_to_it():
    rows = np.array([T0, T0 + MS, T0 + 2 * MS, T0 + 3 * MS], dtype=np.int64)
    secs = np.array([(T0 - 5 * MS) / 1e9, np.nan, (T0 + 9 * MS) / 1e9, (T0 - 2 * READING_TIME_SPAN_NS) / 1e9])
    got = reading_times_ns(rows, secs)
    # a float64 of wall-clock seconds holds the time to within 256 ns
    assert abs(int(got[0]) - (T0 - 5 * MS)) <= 256
    assert got[1] == T0 + MS  # no reading: the row's time
    assert got[2] == T0 + 2 * MS  # never after the row that found it
    assert got[3] == T0 + 3 * MS - READING_TIME_SPAN_NS  # a clock step moves it at most this far back


def test_changes_only_events_are_stamped_at_the_reading():
    b = EventBuilder(CHANNELS, system_pid=1)
    events = b.events(lagged(60))
    gpu = gpu_events(events)
    # readings 0..5 found by rows 7, 17, ... 57: one event each, at the reading's time (10 ms apart from T0)
    assert [e["ts"] for e in gpu] == [(T0 + k * 10 * MS) // 1000 for k in range(6)]
    assert [e["args"] for e in gpu] == [{"energy_joules": float(k), "power_watts": 100.0 + k} for k in range(6)]
    # the cpu track keeps the rows' times
    assert [e["ts"] for e in events if e["name"] == "cpu"][:3] == [T0 // 1000, (T0 + MS) // 1000, (T0 + 2 * MS) // 1000]


def test_every_row_writes_a_gpu_track_once_per_reading():
    b = EventBuilder(CHANNELS, system_pid=1, changes_only=False)
    batch = lagged(60, energy=lambda k: 5.0)  # energy constant: the power still changes per reading
    gpu = gpu_events(b.events(batch))
    assert [e["ts"] for e in gpu] == [(T0 + k * 10 * MS) // 1000 for k in range(6)]
    assert len([e for e in b.events(lagged(60)) if e["name"] == "cpu"]) == 60


def test_the_text_renderer_writes_the_same_events_as_the_dict_renderer():
    layout = TrackLayout(CHANNELS, "sysprof", system_pid=1)
    batch = lagged(80)
    for changes_only in (True, False):
        dicts = EventBuilder(CHANNELS, system_pid=1, changes_only=changes_only).events(batch)
        template = RowTemplate(layout.series, 1, 0, changes_only=changes_only, timed=[g for g, _ in layout.timed])
        text = template.render(batch.timestamps_ns, layout.project(batch.values),
                               layout.track_times_ns(batch.timestamps_ns, batch.values))
        parsed = json.loads("[" + ",\n".join(t for t, _ in text) + "]")
        assert sum(n for _, n in text) == len(parsed)
        key = lambda e: (e["ts"], e["name"])  # noqa: E731 - within a row, one renderer orders by track
        assert sorted(parsed, key=key) == sorted((json.loads(encode_event(e)) for e in dicts), key=key)


def test_composer_handlers_get_gpu_events_at_the_reading():
    layout = TrackLayout(CHANNELS, "composer")
    batch = lagged(40)
    rows = layout.counter_rows(batch.timestamps_ns, batch.values, list(range(len(batch))))

    class Handler:
        def __init__(self):
            self.got = []

        def process_counter_event(self, name, categories, timestamp, wall_clock_time_ns, values):
            self.got.append((name, wall_clock_time_ns, values))

    every = [(t, v) for name, _, _, t, v in rows.events() if name == "gpu/0/power_watts"]
    assert [t for t, _ in every] == [T0 + k * 10 * MS for k in range(4)]  # one per reading, at its time
    h = Handler()
    ChangedEvents(rows.series).send(h, rows)
    assert [t for name, t, _ in h.got if name == "gpu/0/power_watts"] == [T0 + k * 10 * MS for k in range(4)]


def test_xid_instants_sit_at_the_reading_that_counted_them():
    channels = ("gpu/0/xid_total", "gpu/0/xid_last", "gpu/0/reading_time_seconds")
    t = T0 + np.arange(4, dtype=np.int64) * 100 * MS
    v = np.array([[0, 0, (T0 - 50 * MS) / 1e9], [0, 0, (T0 + 50 * MS) / 1e9],
                  [1, 79, (T0 + 150 * MS) / 1e9], [1, 79, (T0 + 150 * MS) / 1e9]])
    (found,) = XidInstants(channels).found(Batch(t, v, channels, 0.1))
    assert abs(found[0] - (T0 + 150 * MS)) <= 256 and found[1]["xid"] == 79


def test_by_phase_gives_each_phase_the_energy_of_its_own_time():
    # The GPU is read every 10 ms, energy +1 J per reading up to reading 10 (at 100 ms), then flat; the rows find
    # each reading 7 ms late. Phase A [0, 100 ms) used all 10 J, phase B [100, 200 ms) none. Stamped at the rows
    # (before), the last step (found at 107 ms) would give B 0.7 J.
    b = EventBuilder(CHANNELS, system_pid=1)
    batch = lagged(200)
    meta = {"interval_s": 0.001, "intervals_s": {"cpu": 0.001, "gpu": 0.01}}
    events = [{"name": "sysprof start", "ph": "i", "ts": T0 // 1000, "pid": 1, "tid": 0, "args": meta}]
    events += b.events(batch) + b.finish()
    events += [{"name": n, "ph": "X", "ts": (T0 + a * MS) // 1000, "dur": (z - a) * 1000, "pid": 1, "tid": 0}
               for n, a, z in (("A", 0, 100), ("B", 100, 200))]
    events.append({"name": "sysprof stop", "ph": "i", "ts": (T0 + 200 * MS) // 1000, "pid": 1, "tid": 0, "args": {}})
    data = TraceData(json.loads(json.dumps(events)))
    phases = {p.name: p for p in by_phase(data, ["A", "B"])}
    assert phases["A"].channels["gpu/0/energy_joules"].amount == pytest.approx(10.0, abs=1e-9)
    assert phases["B"].channels["gpu/0/energy_joules"].amount == pytest.approx(0.0, abs=1e-9)
    # power 100 + k W held from each reading: A holds readings 0..9 for 10 ms each -> mean 104.5 W
    assert phases["A"].channels["gpu/0/power_watts"].mean == pytest.approx(104.5)
