"""GPU XID events (issue 13, item 3): the waiter thread (csrc/gpu/nvml_events.cpp, and pynvml's twin in
sysprof/sampling/portable/nvml_events.py) against the fake NVML's scripted XIDs (tests/fake_nvml), the
channels gpu/<i>/xid_total and xid_last, their failure modes (an older driver without the event symbols,
a device that cannot register, a wait that fails for good, a wait that overruns its timeout), and the
instant events a step of xid_total becomes (sysprof/trace/gpu_events.py) in record's traces and report."""
import gc
import json
import math
import sys
import threading
import types

import numpy as np
import pytest

from cli_support import run_cli
from sysprof.pipeline.producers import Xids
from sysprof.trace.events import chrome_events
from sysprof.trace.gpu_events import XID_EVENT, xid_lines, xid_meaning

from fake_nvml.support import (  # noqa: F401 - fake_builds, fake and fresh_pynvml are fixtures
    NVLINK_NOTE, fake, fake_builds, fresh_pynvml, gpu_sampler, needs_native, wait_for)

BACKENDS = [pytest.param("native", marks=needs_native), "psutil"]
XIDS = "0:79:150,0:13:250"  # device 0: XID 79 at 150 ms after nvmlInit, then XID 13 at 250 ms


def _xid(row, d):
    return row[f"gpu/{d}/xid_total"], row[f"gpu/{d}/xid_last"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_scripted_xids_are_counted(fake, fresh_pynvml, backend):  # noqa: F811
    f = fake(xids=XIDS)
    s = gpu_sampler(backend)
    assert s.errors == {"gpu": NVLINK_NOTE}  # both devices registered: no note
    row = s.sample()
    wait_for(lambda: _xid(s.sample(), 0) == (2.0, 13.0))  # each sample() is a fresh reading
    assert f.xids_sent() == 2
    row = s.sample()
    assert _xid(row, 0) == (2.0, 13.0) and _xid(row, 1) == (0.0, 0.0)
    assert f.calls("nvmlDeviceRegisterEvents", 0) == f.calls("nvmlDeviceRegisterEvents", 1) == 1
    assert f.calls("nvmlEventSetCreate") == 1
    del s, row
    gc.collect()
    wait_for(lambda: f.refcount() == 0)
    assert f.calls("nvmlEventSetFree") == 1 and f.calls("nvmlShutdown") == 1
    assert f.unsafe_shutdowns() == 0 and f.uninitialized_calls() == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_device_that_cannot_register_reads_nan(fake, fresh_pynvml, backend):  # noqa: F811
    fake(xids="1:48:50,0:31:100", events_unsupported=1)  # device 1's XID is never delivered
    s = gpu_sampler(backend)
    assert set(s.errors["gpu"].split("; ")) == set(NVLINK_NOTE.split("; ")) | {
        "gpu/1: xid_total, xid_last read NaN (nvmlDeviceRegisterEvents: NVML_ERROR_NOT_SUPPORTED)"}
    wait_for(lambda: _xid(s.sample(), 0) == (1.0, 31.0))
    t, last = _xid(s.sample(), 1)
    assert math.isnan(t) and math.isnan(last)


@pytest.mark.parametrize("backend", BACKENDS)
def test_older_driver_without_event_symbols(fake, fresh_pynvml, backend):  # noqa: F811
    f = fake("noevents", xids=XIDS)
    s = gpu_sampler(backend)
    for d in (0, 1):
        assert (f"gpu/{d}: xid_total, xid_last read NaN (nvmlEventSetCreate: NVML_ERROR_FUNCTION_NOT_FOUND)"
                in s.errors["gpu"].split("; "))
        assert all(math.isnan(v) for v in _xid(s.sample(), d))


@pytest.mark.parametrize("backend", BACKENDS)
def test_wait_that_fails_for_good_is_noted(fake, fresh_pynvml, backend):  # noqa: F811
    f = fake(wait_error=3)  # NVML_ERROR_NOT_SUPPORTED from nvmlEventSetWait_v2
    s = gpu_sampler(backend)
    note = "gpu: xid_total, xid_last read NaN from now on (nvmlEventSetWait_v2: NVML_ERROR_NOT_SUPPORTED)"
    wait_for(lambda: s.sample() is not None and note in s.errors.get("gpu", ""))
    assert all(math.isnan(v) for d in (0, 1) for v in _xid(s.sample(), d))
    assert f.calls("nvmlEventSetWait_v2") == 1  # not asked again
    del s
    gc.collect()
    wait_for(lambda: f.refcount() == 0)
    assert f.calls("nvmlEventSetFree") == 1 and f.unsafe_shutdowns() == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_closing_does_not_wait_for_an_overrunning_wait(fake, fresh_pynvml, backend):  # noqa: F811
    # Every wait blocks 3 s, past its 100 ms timeout (a driver in a bad state).
    f = fake(hang_call="nvmlEventSetWait_v2", hang_at=-1, hang_ms=3000, xids=XIDS)
    s = gpu_sampler(backend)
    s.start()
    wait_for(lambda: f.hanging() == 1)
    s.stop()
    del s
    gc.collect()
    if backend == "psutil":  # the poller ends on its thread once no reader is left
        wait_for(lambda: not [t for t in threading.enumerate() if t.name == "sysprof-pynvml"])
    # Closed while the wait still blocks: the XID thread makes the last calls once it returns ...
    assert f.hanging() == 1 and f.calls("nvmlShutdown") == 0
    wait_for(lambda: f.refcount() == 0)
    # ... the set freed, NVML shut down once, never under a call in flight.
    assert f.calls("nvmlEventSetFree") == 1 and f.calls("nvmlShutdown") == 1
    assert f.unsafe_shutdowns() == 0 and f.uninitialized_calls() == 0


class _B(types.SimpleNamespace):
    def __len__(self):
        return len(self.timestamps_ns)


def test_xid_instants_from_rows():
    nan = math.nan
    channels = ["gpu/0/power_watts", "gpu/0/xid_total", "gpu/0/xid_last", "gpu/1/xid_total", "gpu/1/xid_last"]
    x = Xids(channels, pid=7)
    us = lambda t: t // 1000  # noqa: E731
    rows = [[100, 0, 0, nan, nan], [100, 0, 0, nan, nan], [101, 1, 79, nan, nan], [102, nan, nan, nan, nan],
            [103, 3, 13, nan, nan]]
    b = _B(timestamps_ns=np.array([1000, 2000, 3000, 4000, 5000]), values=np.array(rows, dtype=float))
    ev = chrome_events(x.take(b, None), us)
    assert ev == [
        {"name": XID_EVENT, "ph": "i", "s": "g", "ts": 3, "pid": 7, "tid": 0,
         "args": {"gpu": 0, "xid": 79, "meaning": xid_meaning(79), "count": 1}},
        {"name": XID_EVENT, "ph": "i", "s": "g", "ts": 5, "pid": 7, "tid": 0,  # NaN row in between: counted from 1
         "args": {"gpu": 0, "xid": 13, "meaning": xid_meaning(13), "count": 2}}]
    assert xid_meaning(79) == "GPU has fallen off the bus"
    # The next batch continues from the last count: no step, no event; then one on device 1.
    b2 = _B(timestamps_ns=np.array([6000, 7000]), values=np.array([[1, 3, 13, 0, 0], [1, 3, 13, 1, 48]], dtype=float))
    assert [(e["ts"], e["args"]["gpu"], e["args"]["xid"]) for e in chrome_events(x.take(b2, None), us)] == [(7, 1, 48)]
    assert Xids(["cpu/percent"], 0).take(b2, None) == []


def test_report_lines_for_xid_instants():
    from sysprof.report import Instant
    inst = [Instant(XID_EVENT, 3_500_000, 1, 0, {"gpu": 0, "xid": 79, "meaning": xid_meaning(79), "count": 1}),
            Instant("other", 4_000_000, 1, 0, {}),
            Instant(XID_EVENT, 5_000_000, 1, 0, {"gpu": 1, "xid": 13, "meaning": xid_meaning(13), "count": 2})]
    assert xid_lines(inst, 1_000_000) == [
        "gpu/0: XID 79 at +2.500 s: GPU has fallen off the bus",
        f"gpu/1: XID 13 x2 at +4.000 s: {xid_meaning(13)}"]


@needs_native
@pytest.mark.parametrize("suffix", [".json", ".pftrace"])
def test_record_writes_xid_instants_and_report_lists_them(fake, tmp_path, suffix):
    if suffix == ".pftrace":
        pytest.importorskip("perfetto")
    fake(xids="0:79:300")
    out = tmp_path / f"t{suffix}"
    r = run_cli("record", "-o", out, "--gpu", "-q", "--", sys.executable, "-c", "import time; time.sleep(1.2)")
    assert r.returncode == 0, r.stderr
    from sysprof.report import TraceData
    from sysprof.trace.load import load_events
    data = TraceData(load_events(str(out)))
    xids = [i for i in data.instants if i.name == XID_EVENT]
    assert [(i.args["gpu"], i.args["xid"], i.args["count"]) for i in xids] == [(0, 79, 1)]
    assert xids[0].args["meaning"] == "GPU has fallen off the bus"
    # the stop event holds each GPU channel's refresh period as recorded (the fake changes at every read)
    refresh = data.stop["gpu_refresh_s"]
    assert set(refresh) == {c for c in data.meta["channels"] if c.startswith("gpu/") and "/xid_" not in c}
    assert refresh["gpu/0/power_watts"] > 0 and refresh["gpu/0/memory_total_bytes"] is None
    rep = run_cli("report", "--json", out)
    assert rep.returncode == 0, rep.stderr
    lines = json.loads(rep.stdout)["gpu_xid_events"]
    assert len(lines) == 1 and lines[0].startswith("gpu/0: XID 79 at +") and lines[0].endswith(
        ": GPU has fallen off the bus")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("suffix", [".json", ".pftrace"])
def test_composer_path_writes_the_same_xid_instants(fake, fresh_pynvml, tmp_path, backend, suffix,  # noqa: F811
                                                    cycle_trace_handler):
    """sysprof.Profiler (its SystemProfiler) writes record's XID instant, args exact, into its cycle file; and the
    GPU refresh periods measured at start."""
    from sysprof import Profiler
    from sysprof.report import TraceData
    from sysprof.sampling.gpu_refresh import REFRESH_EVENT
    from sysprof.trace.load import load_events

    out = tmp_path / "traces"
    h = cycle_trace_handler(suffix, out)
    f = fake(xids="0:79:300,1:48:1100")  # far apart: a row sees the first before the second comes
    prof = Profiler(schedule=lambda s: "active", trace_handlers=[h], sys_prof_cpu=False, sys_prof_gpu=True,
                    sys_prof_stats_thread_interval_seconds=0.01)
    sp = prof.system_profiler
    sp.backend = backend
    prof.start()
    wait_for(lambda: (sp.sampler.latest() or {}).get("gpu/0/xid_total") == 1.0)
    prof.step()
    wait_for(lambda: (sp.sampler.latest() or {}).get("gpu/1/xid_total") == 1.0)
    from sysprof.pipeline.producers import GpuRefresh

    (refresh_producer,) = [p for p in sp.session.producers if isinstance(p, GpuRefresh)]
    wait_for(lambda: refresh_producer.measured.args is not None)
    prof.step()
    prof.stop()
    assert f.xids_sent() == 2
    events = [e for p in sorted(out.glob(f"ep*{suffix}")) for e in load_events(str(p))]
    data = TraceData(events)
    xids = [i for i in data.instants if i.name == XID_EVENT]
    assert [i.args for i in xids] == [{"gpu": 0, "xid": 79, "meaning": "GPU has fallen off the bus", "count": 1},
                                      {"gpu": 1, "xid": 48, "meaning": "double-bit ECC error", "count": 1}]
    assert xids[0].ts_us < xids[1].ts_us
    (refresh,) = [i for i in data.instants if i.name == REFRESH_EVENT]
    a = refresh.args
    assert (a["window_s"], a["read_interval_s"], a["backend"]) == (0.25, 0.001, backend)
    assert "gpu/0/power_watts" in a["periods_s"] and not any("/xid_" in c for c in a["periods_s"])
    assert a["periods_s"]["gpu/0/power_watts"] > 0 and a["periods_s"]["gpu/0/memory_total_bytes"] is None


def test_composer_handler_without_the_extension_gets_plain_instants():
    """A handler without process_system_instant (Composer's) gets process_instant_event: name, no args."""
    from sysprof.profiler.composer_sink import send_instants
    from sysprof.profiler.trace_handler import TraceHandler
    from sysprof.trace import events as ev

    got = []

    class Composerish:
        def process_instant_event(self, **kw):
            got.append(("plain", kw))

    class Ours(TraceHandler):  # the base class's default: the plain instant too
        def process_instant_event(self, **kw):
            got.append(("base", kw))

    send_instants([Composerish(), Ours()], [(ev.instant(XID_EVENT, 5_000, 0, {"gpu": 0, "xid": 79}), "ts")])
    kw = {"name": XID_EVENT, "categories": ("gpu",), "timestamp": "ts", "wall_clock_time_ns": 5_000}
    assert got == [("plain", kw), ("base", kw)]
