"""Compact traces (issue 28): values written at their channel's resolution (``registry.decimals_of``,
``tracks.Quantiser``), whole values as JSON integers (``tracks.numbers``), ``record``'s gzipped default output, and
traces written before these changes still reading the same."""
from __future__ import annotations

import gzip
import json
import math
import os
import pathlib
import re
import zlib

import numpy as np
import pytest

import sysprof
from sysprof.sampling.registry import decimals_of
from sysprof.trace.chrome import ChromeTraceWriter, encode_event, read_trace
from sysprof.trace.tracks import EventBuilder, Quantiser, numbers

from cli_support import SYSPROF, event, run_cli

NAN, INF = float("nan"), float("inf")
OLD = pathlib.Path(__file__).parent / "fixtures" / "traces" / "record-before-issue28.json"


class _Batch:
    def __init__(self, times_ns, values):
        self.timestamps_ns = np.asarray(times_ns, dtype=np.int64)
        self.values = np.asarray(values, dtype=np.float64)

    def __len__(self):
        return len(self.timestamps_ns)


# --------------------------------------------------------------------------------------------------
# the rule per unit
# --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("channel, interval, decimals", [
    ("cpu/percent", 0.001, 2), ("cpu/3/percent", 1.0, 2), ("process/cpu_percent", 0.001, 2),
    ("memory/used_percent", 0.01, 2), ("gpu/0/utilization_percent", 0.001, 2),
    ("pressure/io/some_seconds_per_second", 0.001, 6), ("disk/sda/busy_time_seconds_per_second", 0.001, 6),
    ("cpu/user_seconds_total", 0.001, 9), ("gpu/0/violation_power_seconds_total", 0.001, 9),
    ("memory/used_bytes", 0.001, 0), ("disk/sda/read_bytes", 0.001, 0), ("gpu/1/sm_clock_hz", 0.001, 0),
    ("gpu/0/power_watts", 0.001, 3), ("gpu/0/energy_joules", 0.001, 3),
    # counter rates: one unit per interval, written to a thousandth of it or finer
    ("disk/sda/read_bytes_per_second", 0.0001, 0), ("disk/sda/read_bytes_per_second", 0.001, 0),
    ("net/eth0/packets_recv_per_second", 0.002, 1), ("net/eth0/packets_recv_per_second", 0.01, 1),
    ("vmstat/pgfault_per_second", 0.1, 2), ("cgroup/io_write_bytes_per_second", 1.0, 3),
    ("gpu/0/pcie_tx_bytes_per_second", 10.0, 4),
    # written as sampled: counts, load averages, limits, temperatures, unknown channels
    ("load/1m", 0.001, None), ("disk/sda/read_count", 0.001, None), ("cgroup/cpu_limit_cores", 0.001, None),
    ("gpu/0/temperature_celsius", 0.001, None), ("composer/cpu_percent", 0.001, None),
    ("disk/sda/read_bytes_per_second", 0.0, None),
])
def test_decimals_per_unit(channel, interval, decimals):
    assert decimals_of(channel, interval) == decimals


def test_a_rate_at_its_decimals_gives_back_the_count_of_its_interval():
    """Why a thousandth of a unit per interval: ``round(rate * dt)`` is the count again for any dt up to 500
    intervals (here 1 ms rates of 0..5000 bytes over dt from 0.5 to 3 ms)."""
    q = Quantiser([decimals_of("disk/sda/read_bytes_per_second", 0.001)])
    for dt in (0.0005, 0.0009997, 0.001, 0.0010003, 0.0017, 0.003):
        counts = np.arange(0, 5001, dtype=np.float64)
        rates = q((counts / dt)[:, None])[:, 0]
        assert (np.rint(rates * dt) == counts).all(), dt


# --------------------------------------------------------------------------------------------------
# Quantiser and numbers: exact values
# --------------------------------------------------------------------------------------------------

def test_quantiser_rounds_each_column_to_its_decimals():
    values = np.array([[100 / 3, 4096 / 0.0010003, 1073741824.0, 0.1 + 0.2, 7704.330000000001],
                       [200 / 3, 1 / 0.0014, -1e-17, 0.52, 1e17],
                       [100 / 7, NAN, INF, -INF, 2.0 ** 52 + 1]])
    before = values.copy()
    got = Quantiser([2, 0, 0, None, 9])(values)
    assert got[0].tolist() == [33.33, 4094772.0, 1073741824.0, 0.30000000000000004, 7704.33]
    assert got[1].tolist() == [66.67, 714.0, 0.0, 0.52, 1e17]
    assert got[2, 0] == 14.29 and math.isnan(got[2, 1]) and got[2, 2] == INF and got[2, 3] == -INF
    assert got[2, 4] == 2.0 ** 52 + 1  # too large to round exactly: kept as it is
    assert math.copysign(1.0, got[1, 2]) == 1.0  # -1e-17 -> 0.0, never -0.0
    np.testing.assert_array_equal(values, before)  # the caller's rows are left as sampled


def test_quantised_values_are_written_with_their_decimals_and_read_back_equal():
    rng = np.random.default_rng(28)
    raw = np.column_stack([100 * rng.integers(0, 97, 500) / rng.integers(97, 1000, 500),  # tick shares
                           rng.integers(0, 10 ** 9, 500) / rng.uniform(0.0009, 0.0011, 500),  # 1 ms rates
                           rng.integers(0, 10 ** 6, 500) / 1e6])  # µs totals in seconds
    got = Quantiser([2, 0, 6])(raw)
    for col, decimals in enumerate((2, 0, 6)):
        for v in got[:, col].tolist():
            text = json.dumps(v)
            assert float(text) == v
            assert len(text.split(".")[1]) <= max(decimals, 1) if "." in text else True, text
            assert "e" not in text, text
    assert (np.abs(got - raw) <= 0.5 * 10.0 ** -np.array([2, 0, 6]) * (1 + 1e-9)).all()


def test_numbers_writes_whole_values_as_integers():
    block = np.array([[4096.0, 33.33, NAN, INF, 2.0 ** 53, -0.0, 25276182528.0]])
    row = numbers(block)[0]
    assert [type(v) for v in row] == [int, float, float, float, float, int, int]
    assert row[0] == 4096 and row[1] == 33.33 and math.isnan(row[2]) and row[4] == 2.0 ** 53 and row[5] == 0
    assert numbers(np.array([[1.0, 2.0]])) == [[1, 2]] and numbers(np.array([[0.5]])) == [[0.5]]
    assert json.dumps(numbers(np.array([[25276182528.0, 0.0]]))[0]) == "[25276182528, 0]"


# --------------------------------------------------------------------------------------------------
# the renderer: quantised before the changes are found
# --------------------------------------------------------------------------------------------------

CHANNELS = ("cpu/percent", "disk/sda/read_bytes_per_second", "memory/used_bytes", "load/1m")
DECIMALS = [decimals_of(c, 0.001) for c in CHANNELS]
T0 = 1_700_000_000_000_000_000


def _texts(builder, rows):
    batch = _Batch([T0 + i * 1_000_000 for i in range(len(rows))], rows)
    return [encode_event(e) for e in builder.events(batch)] + [encode_event(e) for e in builder.finish()]


def test_record_renderer_writes_values_at_their_resolution():
    rows = [[100 / 3, 4096 / 0.0010003, 1073741824.0, 0.52],
            [100 / 3 + 1e-12, 4096 / 0.0010003 + 1e-4, 1073741824.0, 0.52],  # moved below the resolution
            [200 / 3, 0.0, 1073745920.0, 0.52]]
    got = _texts(EventBuilder(CHANNELS, system_pid=7, decimals=DECIMALS), rows)
    ts = T0 // 1000
    assert got == [
        f'{{"name":"cpu","ph":"C","ts":{ts},"pid":7,"tid":0,"args":{{"percent":33.33}}}}',
        f'{{"name":"disk/sda","ph":"C","ts":{ts},"pid":7,"tid":0,"args":{{"read_bytes_per_second":4094772}}}}',
        f'{{"name":"memory","ph":"C","ts":{ts},"pid":7,"tid":0,"args":{{"used_bytes":1073741824}}}}',
        f'{{"name":"load","ph":"C","ts":{ts},"pid":7,"tid":0,"args":{{"1m":0.52}}}}',
        f'{{"name":"cpu","ph":"C","ts":{ts + 2000},"pid":7,"tid":0,"args":{{"percent":66.67}}}}',
        f'{{"name":"disk/sda","ph":"C","ts":{ts + 2000},"pid":7,"tid":0,"args":{{"read_bytes_per_second":0}}}}',
        f'{{"name":"memory","ph":"C","ts":{ts + 2000},"pid":7,"tid":0,"args":{{"used_bytes":1073745920}}}}',
        f'{{"name":"load","ph":"C","ts":{ts + 2000},"pid":7,"tid":0,"args":{{"1m":0.52}}}}',  # finish()
    ]


def test_renderer_without_decimals_keeps_every_digit():
    rows = [[100 / 3, 4096 / 0.0010003, 1073741824.0, 0.52], [100 / 3 + 1e-12, 4096 / 0.0010003, 1073741824.0, 0.52]]
    got = _texts(EventBuilder(CHANNELS, system_pid=7), rows)
    assert '"args":{"percent":33.333333333333336}' in got[0]
    assert '"read_bytes_per_second":4094771.568529441' in got[1]
    assert '"args":{"percent":33.33333333333434}' in got[4]  # the 1e-12 move is a change here
    assert '"used_bytes":1073741824}' in got[2]  # whole: an integer either way


def test_every_row_renderer_quantises_too():
    rows = [[100 / 3, 1.0, 2.0, 0.5]] * 2
    got = _texts(EventBuilder(CHANNELS, system_pid=7, decimals=DECIMALS, changes_only=False), rows)
    assert len(got) == 8 and sum('"percent":33.33}' in t for t in got) == 2


# --------------------------------------------------------------------------------------------------
# record: the gzipped default, the values in it, -o kept as given
# --------------------------------------------------------------------------------------------------

def _units(events):
    return next(e for e in events if e.get("name") == "sysprof units")["args"]["units"]


def test_record_default_output_is_gzipped_json_that_report_reads(tmp_path):
    proc = run_cli("record", "-q", "-i", "1ms", "--cpu", "--memory", "--disk", "--net", "--", "sleep", "0.3",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (name,) = os.listdir(tmp_path)
    assert name.startswith("sysprof-") and name.endswith(".json.gz")
    raw = (tmp_path / name).read_bytes()
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    text = inflate.decompress(raw)
    # one gzip member, whole (a streamed file of several members opens truncated in some viewers)
    assert inflate.eof and inflate.unused_data == b""
    events = json.loads(text)
    assert events == read_trace(tmp_path / name)
    stop = event(events, "sysprof stop")
    rep = run_cli("report", tmp_path / name, "--json")
    assert rep.returncode == 0, rep.stderr
    assert json.loads(rep.stdout)["samples"] == stop["args"]["samples_written"] > 0
    units = _units(events)
    checked = set()
    for e in events:
        if e.get("ph") != "C" or e["name"] == "sysprof":
            continue
        for k, v in e["args"].items():
            unit = units.get(f"{e['name']}/{k}")
            decimals = {"%": 2, "s": 9, "s/s": 6}.get(unit)
            if unit in ("B", "B/s", "/s"):  # whole bytes; rates at 1 ms: whole units per second
                assert type(v) is int, (e["name"], k, v)
            elif decimals is not None:
                assert round(v, decimals) == v, (e["name"], k, v)
            checked.add(unit)
    assert {"%", "B", "B/s", "s"} <= checked
    assert not re.search(rb"[:,\[]-0(?:\.0)?[,}\]]", text) and not re.search(rb"[0-9]e-", text)  # no -0, no 1e-17


def test_record_keeps_the_name_given(tmp_path):
    for name, opens in (("trace.json", b"[\n"), ("trace.JSON.GZ", b"\x1f\x8b")):
        proc = run_cli("record", "-q", "-o", tmp_path / name, "--cpu", "--", "true")
        assert proc.returncode == 0, proc.stderr
        assert (tmp_path / name).read_bytes()[:2] == opens
        event(read_trace(tmp_path / name), "sysprof stop")
    assert sorted(os.listdir(tmp_path)) == ["trace.JSON.GZ", "trace.json"]


def test_pftrace_writes_whole_values_as_integers_and_reads_them_back(tmp_path):
    pytest.importorskip("perfetto")
    from sysprof.trace.perfetto import read_events
    from sysprof.trace.perfetto_write import PerfettoTraceWriter

    path = tmp_path / "t.pftrace"
    builder = EventBuilder(CHANNELS, system_pid=7, decimals=DECIMALS)
    rows = [[100 / 3, 4096 / 0.0010003, 1073741824.0, 0.52], [200 / 3, 0.0, 1073745920.0, 0.52]]
    with PerfettoTraceWriter(path) as w:
        builder.ts = w.timestamp
        w.write_many(builder.events(_Batch([T0, T0 + 1_000_000], rows)))
        w.write_many(builder.finish())
    got = [(e["name"], e["args"]) for e in read_events(path) if e.get("ph") == "C"]
    assert got[:4] == [("cpu", {"percent": 33.33}), ("disk/sda", {"read_bytes_per_second": 4094772}),
                       ("memory", {"used_bytes": 1073741824}), ("load", {"1m": 0.52})]
    assert got[4:7] == [("cpu", {"percent": 66.67}), ("disk/sda", {"read_bytes_per_second": 0}),
                        ("memory", {"used_bytes": 1073745920})]


# --------------------------------------------------------------------------------------------------
# traces written before: every reader still reads them, and the same
# --------------------------------------------------------------------------------------------------

def test_a_trace_written_before_reads_as_it_did(tmp_path):
    """A ``record`` trace of the writer before issue 28 (every digit, whole values as ``4096.0``), as JSON and
    gzipped: ``read_trace``, ``sysprof.read_trace`` and ``report`` read the values it holds."""
    text = OLD.read_text()
    assert '"used_percent":8.74114377656705' in text and '"used_bytes":2209427456.0' in text
    gz = tmp_path / "old.json.gz"
    gz.write_bytes(gzip.compress(text.encode(), 9))
    for path in (OLD, gz):
        events = read_trace(path)
        assert events == json.loads(text)
        df = sysprof.read_trace(path)
        assert len(df) == event(events, "sysprof stop")["args"]["samples_written"] == 16
        assert df["memory/used_percent"].tolist()[:2] == [8.74114377656705, 8.750737123969545]
        assert df["memory/used_bytes"].tolist()[:2] == [2209427456.0, 2211852288.0]
        assert df["disk/vda/write_bytes_per_second"].tolist()[5] == 667659.1903018589
        assert df["cpu/user_percent"].tolist()[:3] == [66.66666666666667, 100.0, 100.0]
        rep = run_cli("report", path, "--json")
        assert rep.returncode == 0, rep.stderr
        assert json.loads(rep.stdout)["samples"] == 16


def test_whole_values_as_integers_read_as_the_same_numbers(tmp_path):
    """The same events written with whole values as floats (the writer before) and as integers: every reader
    gives the same table."""
    events = [e for e in json.loads(OLD.read_text())]
    ints = [dict(e, args={k: int(v) if isinstance(v, float) and v.is_integer() else v
                          for k, v in e["args"].items()}) if e.get("ph") == "C" else e for e in events]
    paths = []
    for name, evs in (("floats.json", events), ("ints.json", ints)):
        with ChromeTraceWriter(tmp_path / name) as w:
            w.write_many(evs)
        paths.append(tmp_path / name)
    assert '"used_bytes":2209427456.0' in paths[0].read_text() and '"used_bytes":2209427456,' in paths[1].read_text()
    a, b = (sysprof.read_trace(p) for p in paths)
    assert a.equals(b) and a.attrs["units"] == b.attrs["units"]
