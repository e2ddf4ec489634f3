"""The GPU's own interval (issue 13, item 4): ``Sampler(gpu_interval=...)`` as an alias of ``intervals["gpu"]``,
its default (sysprof/sampling/gpu_interval.py), ``--gpu-interval``, ``SystemProfiler(gpu_interval_seconds=...)``;
the refresh-period rule (sysprof/sampling/gpu_refresh.py); joules per phase from the energy counter."""
import math

import numpy as np
import pytest

import sysprof
from sysprof.sampling.gpu_interval import DEFAULT_GPU_INTERVAL_S, with_gpu_interval
from sysprof.sampling.gpu_refresh import change_period, describe_period

from fake_nvml.support import NO_HOST, fake, fake_builds, needs_native  # noqa: F401 - fixtures


def test_gpu_interval_rule():
    from sysprof.sampling.default_intervals import default_interval

    assert DEFAULT_GPU_INTERVAL_S == 0.01
    assert default_interval("gpu", 0.001) == 0.01  # the default at 1 kHz
    assert default_interval("gpu", 0.05) == 0.05  # a longer sampler interval: the sampler's
    assert with_gpu_interval(None, None) is None  # no gpu_interval: the default applies (not the user's)
    assert with_gpu_interval({"cpu": 0.002}, None) == {"cpu": 0.002}  # untouched
    assert with_gpu_interval({"gpu": 0.004}, None) == {"gpu": 0.004}  # intervals["gpu"] stays
    assert with_gpu_interval({"cpu": 0.002}, 0.02) == {"cpu": 0.002, "gpu": 0.02}
    assert with_gpu_interval({"gpu": 0.02}, 0.02) == {"gpu": 0.02}  # the same twice: fine
    with pytest.raises(ValueError, match=r"gpu_interval=0.02 and intervals\['gpu'\]=0.01 disagree"):
        with_gpu_interval({"gpu": 0.01}, 0.02)
    for bad in ("10ms", True, math.nan):
        with pytest.raises(ValueError, match="gpu_interval must be a number of seconds"):
            with_gpu_interval(None, bad)


@needs_native
def test_sampler_gpu_interval(fake):
    fake()
    s = sysprof.Sampler(interval=0.001, gpu=True, backend="native", **NO_HOST)
    assert s.intervals["gpu"] == pytest.approx(0.01)
    s = sysprof.Sampler(interval=0.001, gpu=True, gpu_interval=0.02, backend="native", **NO_HOST)
    assert s.intervals["gpu"] == pytest.approx(0.02)
    s.start()
    s.sample()
    s.stop()
    st = s.stats
    # read at the first tick at or after each multiple of 20 ticks (and at the stop): at most one in 20 + 2
    assert 1 <= st["reads"]["gpu"] <= st["taken"] // 20 + 2, st
    s = sysprof.Sampler(interval=0.05, gpu=True, backend="native", **NO_HOST)
    assert s.intervals["gpu"] == pytest.approx(0.05)
    with pytest.raises(ValueError, match="'gpu' is not sampled"):
        sysprof.Sampler(interval=0.001, gpu=False, gpu_interval=0.02, backend="native", **NO_HOST)
    with pytest.raises(ValueError, match=r"intervals\['gpu'\] must be a number of seconds in \[interval = 0.01"):
        sysprof.Sampler(interval=0.01, gpu=True, gpu_interval=0.001, backend="native", **NO_HOST)


def test_cli_gpu_interval_is_interval_gpu():
    from sysprof.cli.parser import build_parser
    from sysprof.cli.sources import intervals_from_args

    p = build_parser()
    for flag in ("--gpu-interval", "--interval-gpu"):
        args = p.parse_args(["record", "--gpu", flag, "20ms", "--", "true"])
        assert intervals_from_args(args, {"gpu": True}) == {"gpu": 0.02}
    args = p.parse_args(["record", "--gpu", "--", "true"])
    assert intervals_from_args(args, {"gpu": True}) == {}  # the Sampler's default applies


def test_system_profiler_gpu_interval_seconds(monkeypatch):
    import sysprof.sampling.sampler as sampler_mod

    seen = {}

    class FakeSampler:
        def __init__(self, **kw):
            seen.update(kw)

    monkeypatch.setattr(sampler_mod, "Sampler", FakeSampler)
    sysprof.SystemProfiler(profile_gpu=True, gpu_interval_seconds=0.02)._make_sampler()
    assert seen["gpu_interval"] == 0.02 and seen["gpu"] is True
    seen.clear()
    sysprof.SystemProfiler(profile_gpu=False, gpu_interval_seconds=0.02)._make_sampler()
    assert seen["gpu_interval"] is None  # no gpu: nothing to pass on


def test_change_period_rule():
    ms = 1_000_000
    t = np.arange(0, 101) * ms  # rows every 1 ms
    v = (np.arange(101) // 10).astype(float)  # steps every 10 ms: changes at 10, 20, ..., 100 ms
    assert change_period(t, v) == {"period_s": 0.01, "changes": 10, "at_least_s": None}
    v2 = v.copy()
    v2[:35] = np.nan  # NaN rows are skipped: changes at 40, 50, ... ms (the value at 35 ms is the first)
    assert change_period(t, v2)["period_s"] == 0.01 and change_period(t, v2)["changes"] == 7
    const = np.full(101, 5.0)
    assert change_period(t, const) == {"period_s": None, "changes": 0, "at_least_s": 0.1}
    assert describe_period(change_period(t, const)) == ">= 100 ms"
    assert describe_period(change_period(t, np.full(101, np.nan))) == "no value"
    assert describe_period(change_period(t, v)) == "10 ms"


def test_joules_per_phase_from_the_energy_counter():
    from sysprof.report import TraceData, by_phase
    from sysprof.report.verdict import is_key_channel

    # gpu/0 every 0.1 s: the energy counter rises 25 J per sample (250 W); power_watts, a lagging 1 s average,
    # reads 200 W. The span [0.2, 0.6) holds the steps ending at 0.3 ... 0.6 s: 4 x 25 = 100 J from the
    # counter, where integrating power_watts would say 80 J.
    ev = [{"name": "sysprof start", "ph": "i", "ts": 0, "pid": 1, "tid": 0, "args": {"interval_s": 0.1}}]
    ev += [{"name": "gpu/0", "ph": "C", "ts": i * 100_000, "pid": 1, "tid": 0,
            "args": {"energy_joules": 1000.0 + 25 * i, "power_watts": 200.0}} for i in range(11)]
    ev.append({"name": "step", "ph": "X", "ts": 200_000, "dur": 400_000, "pid": 1, "tid": 1})
    ev.append({"name": "sysprof stop", "ph": "i", "ts": 1_000_000, "pid": 1, "tid": 0, "args": {}})
    (phase,) = by_phase(TraceData(ev), "step")
    energy = phase.channels["gpu/0/energy_joules"]
    assert (energy.amount, energy.amount_unit) == (pytest.approx(100.0), "J")
    assert phase.channels["gpu/0/power_watts"].amount == pytest.approx(80.0)
    assert is_key_channel("gpu/0/energy_joules")  # shown in report --by's table


def test_change_tracker_over_batches():
    import types

    from sysprof.sampling.gpu_refresh import ChangeTracker

    class B(types.SimpleNamespace):
        def __len__(self):
            return len(self.timestamps_ns)

    ms = 1_000_000
    tr = ChangeTracker(["cpu/percent", "gpu/0/power_watts", "gpu/0/xid_total", "gpu/0/memory_total_bytes"])
    assert [c for c, _ in tr.cols] == ["gpu/0/power_watts", "gpu/0/memory_total_bytes"]  # XIDs are events
    nan = math.nan
    # power changes at 20, 40 ms (batch 1) and 60 ms (batch 2); a NaN row between does not count as a change
    tr.update(B(timestamps_ns=np.array([0, 10, 20, 30, 40]) * ms,
                values=np.array([[1, 100, 0, 8], [1, 100, 0, 8], [1, 110, 0, 8], [1, nan, 0, 8], [1, 120, 0, 8]],
                                dtype=float)))
    tr.update(B(timestamps_ns=np.array([50, 60]) * ms, values=np.array([[1, 120, 0, 8], [1, 130, 0, 8]], dtype=float)))
    assert tr.periods() == {"gpu/0/power_watts": 0.02, "gpu/0/memory_total_bytes": None}


@needs_native
def test_info_shows_refresh_periods(fake):
    import json

    from cli_support import run_cli

    fake()
    r = run_cli("info", "--json")
    assert r.returncode == 0, r.stderr
    refresh = json.loads(r.stdout)["gpu_refresh"]
    assert refresh["window_s"] == 0.5 and refresh["backend"] == "native"
    ch = refresh["channels"]
    assert "gpu/0/xid_total" not in ch  # events, not polled
    # the fake's levels change at every read; the totals never do
    assert ch["gpu/0/power_watts"]["period_s"] > 0 and ch["gpu/0/power_watts"]["changes"] >= 2
    assert ch["gpu/0/memory_total_bytes"]["period_s"] is None and ch["gpu/0/memory_total_bytes"]["changes"] == 0
    assert ch["gpu/1/nvlink_tx_bytes_per_second"] == {"period_s": None, "changes": 0, "at_least_s": None}
    text = run_cli("info").stdout
    assert "gpu refresh (the median time between changes, read every 1 ms for 0.5 s):" in text
    assert "memory_total_bytes >= " in text and "nvlink_tx_bytes_per_second no value" in text


def test_refresh_args_and_report_line():
    from sysprof.report import Instant
    from sysprof.sampling.gpu_refresh import REFRESH_EVENT, refresh_args, refresh_line

    measured = {"window_s": 0.25, "backend": "native", "channels": {
        "gpu/0/power_watts": {"period_s": 0.02, "changes": 12, "at_least_s": None},
        "gpu/0/energy_joules": {"period_s": 0.01, "changes": 24, "at_least_s": None},
        "gpu/0/memory_total_bytes": {"period_s": None, "changes": 0, "at_least_s": 0.25}}}
    chans = ["gpu/0/power_watts", "gpu/0/energy_joules", "gpu/0/memory_total_bytes", "gpu/0/temperature_celsius"]
    args = refresh_args(measured, chans)
    assert args == {"window_s": 0.25, "read_interval_s": 0.001, "backend": "native", "periods_s": {
        "gpu/0/power_watts": 0.02, "gpu/0/energy_joules": 0.01, "gpu/0/memory_total_bytes": None,
        "gpu/0/temperature_celsius": None}}  # not in the measuring sampler: null
    assert refresh_args({"error": "ValueError: no GPU"}, chans) == {"error": "ValueError: no GPU", "periods_s": {}}
    line = refresh_line([Instant("other", 0, 1, 0, {}), Instant(REFRESH_EVENT, 10, 1, 0, args)])
    assert line == ("GPU refresh periods at start (0.25 s at 1 ms): gpu/0/energy_joules 10 ms, gpu/0/power_watts "
                    "20 ms; 2 changed too rarely to tell")
    assert refresh_line([Instant(REFRESH_EVENT, 10, 1, 0, {"error": "no GPU", "periods_s": {}})]) == (
        "GPU refresh periods at start: not measured (no GPU)")
    assert refresh_line([]) is None


@needs_native
def test_record_stores_the_refresh_periods_measured_at_start(fake, tmp_path):
    import json
    import sys

    from cli_support import run_cli
    from sysprof.report import TraceData
    from sysprof.sampling.gpu_refresh import REFRESH_EVENT
    from sysprof.trace.load import load_events

    fake()
    out = tmp_path / "t.json"
    r = run_cli("record", "-o", out, "--gpu", "-q", "--", sys.executable, "-c", "import time; time.sleep(1.5)")
    assert r.returncode == 0, r.stderr
    data = TraceData(load_events(str(out)))
    (ev,) = [i for i in data.instants if i.name == REFRESH_EVENT]
    a = ev.args
    assert (a["window_s"], a["read_interval_s"], a["backend"]) == (0.25, 0.001, "native")
    polled = {c for c in data.meta["channels"] if c.startswith("gpu/") and "/xid_" not in c}
    assert set(a["periods_s"]) == polled
    assert a["periods_s"]["gpu/0/power_watts"] > 0 and a["periods_s"]["gpu/0/memory_total_bytes"] is None
    assert data.start_ts <= ev.ts_us
    rep = run_cli("report", "--json", out)
    assert rep.returncode == 0, rep.stderr
    assert json.loads(rep.stdout)["gpu_refresh_at_start"].startswith("GPU refresh periods at start (0.25 s at 1 ms): ")
    assert "GPU refresh periods at start (0.25 s at 1 ms): " in run_cli("report", out).stdout
