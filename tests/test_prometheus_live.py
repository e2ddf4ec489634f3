"""The Prometheus endpoint on real samplers: the native sampler on a fixture /proc tree (tests/fixtures/full,
literal values), a burst written into the tree and seen in ``_max`` after it is gone, ``sysprof serve`` as a
user runs it, and ``SystemProfiler(prometheus_listen=...)`` serving what it drains."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

pytest.importorskip("prometheus_client")

import sysprof  # noqa: E402
from sysprof.profiler import Profiler  # noqa: E402
from sysprof.profiler.system_profiler import SystemProfiler  # noqa: E402
from sysprof.prometheus import PrometheusEndpoint  # noqa: E402
from sysprof.sampling.sampler import native_available  # noqa: E402

from cli_support import SYSPROF, assert_one_line_error, run_cli  # noqa: E402
from prometheus_support import parsed, scrape  # noqa: E402
from test_system_profiler import FakeSampler  # noqa: E402 - SystemProfiler's own stand-in

FIXTURES = Path(__file__).parent / "fixtures"
needs_native = pytest.mark.skipif(not native_available()[0], reason="native extension unavailable")
KB = 1024


def wait_for(cond, timeout=30.0):
    """Polls cond until it holds; the timeout only bounds a failing test (never a rate)."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.002)


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "full"
    shutil.copytree(FIXTURES / "full" / "v1", root, symlinks=True)
    return root


def fixture_sampler(root, interval=0.005):
    return sysprof.Sampler(interval=interval, backend="native", proc_root=str(root / "proc"),
                           sys_root=str(root / "sys"), cpu=True, memory=True, disk=True, net=True, load=True)


def one(fams, name, labels=()):
    """The value of sample ``name`` (with ``labels``, a sorted tuple), whichever family holds it."""
    found = [samples[(name, tuple(labels))] for _, samples in fams.values() if (name, tuple(labels)) in samples]
    assert len(found) == 1, (name, labels, len(found))
    return found[0]


@needs_native
def test_fixture_tree_scraped_exactly(tree):
    s = fixture_sampler(tree)
    s.start()
    try:
        with PrometheusEndpoint(s, listen="127.0.0.1:0", window=600.0) as ep:
            wait_for(lambda: s.latest() is not None)
            status, text = scrape(ep.url)
    finally:
        s.stop()
    assert status == 200
    fams = parsed(text)
    sda, eth0 = (("device", "sda"),), (("device", "eth0"),)
    # meminfo (kB x 1024): MemTotal 8000000, MemAvailable 6000000, SwapTotal 4000000, SwapFree 3000000
    for name, want in (("sysprof_memory_total_bytes", 8000000 * KB), ("sysprof_memory_used_bytes", 2000000 * KB),
                       ("sysprof_memory_available_bytes", 6000000 * KB), ("sysprof_memory_dirty_bytes", 512 * KB),
                       ("sysprof_swap_used_bytes", 1000000 * KB), ("sysprof_memory_used_ratio", 0.25)):
        assert fams[name][0] == "gauge", name
        for suffix in ("", "_max", "_min"):
            assert one(fams, name + suffix) == want, name + suffix
    # diskstats sda: 1000 reads, 20000 sectors read, 40000 written, io_ticks 1800 ms; sda1 is a partition
    assert fams["sysprof_disk_read_bytes"][0] == "counter"
    assert fams["sysprof_disk_read_bytes"][1] == {("sysprof_disk_read_bytes_total", sda): 20000 * 512}
    assert one(fams, "sysprof_disk_write_bytes_total", sda) == 40000 * 512
    assert one(fams, "sysprof_disk_read_count_total", sda) == 1000
    assert one(fams, "sysprof_disk_busy_time_seconds_total", sda) == 1.8
    # net/dev eth0 (lo is left out by default)
    assert fams["sysprof_net_bytes_recv"][1] == {("sysprof_net_bytes_recv_total", eth0): 5000000}
    assert one(fams, "sysprof_net_bytes_sent_total", eth0) == 3000000
    assert one(fams, "sysprof_net_packets_recv_total", eth0) == 4000
    # the files do not change: every rate is 0
    assert one(fams, "sysprof_disk_read_bytes_per_second_max", sda) == 0.0
    assert one(fams, "sysprof_disk_busy_time_ratio", sda) == 0.0
    # loadavg "1.50 0.75 0.25 2/345"
    assert [one(fams, f"sysprof_load_{k}") for k in ("1m", "5m", "15m", "procs_running", "procs")] == \
        [1.5, 0.75, 0.25, 2.0, 345.0]
    assert fams["sysprof_cpu_busy_ratio_samples"][0] == "histogram"
    rows = one(fams, "sysprof_sampler_rows_total")
    assert rows >= 1 and one(fams, "sysprof_sampler_interval_seconds") == 0.005
    cpu = one(fams, "sysprof_sampler_cpu_seconds_total")  # the threads' CPU: counted every 0.25 s, within this process's
    assert 0 <= cpu <= time.process_time()


@needs_native
def test_a_burst_between_scrapes_stays_in_max(tree):
    """MemAvailable drops from 6000000 to 1000000 kB and comes back before the scrape: the scrape's gauge is the
    newest value, its _max the burst's (used = 8000000 - 1000000 kB)."""
    meminfo = tree / "proc" / "meminfo"
    text = meminfo.read_text()
    at = text.index("6000000", text.index("MemAvailable"))
    s = fixture_sampler(tree, interval=0.002)
    s.start()
    try:
        with PrometheusEndpoint(s, listen="127.0.0.1:0", window=600.0) as ep:
            fd = os.open(meminfo, os.O_WRONLY)
            try:
                for digits, used in ((b"1000000", 7000000 * KB), (b"6000000", 2000000 * KB)):
                    os.pwrite(fd, digits, at)  # same width, one write: the reader sees old or new
                    wait_for(lambda: (s.latest() or {}).get("memory/used_bytes") == used)
            finally:
                os.close(fd)
            fams = parsed(scrape(ep.url)[1])
            again = parsed(scrape(ep.url)[1])
    finally:
        s.stop()
    assert one(fams, "sysprof_memory_used_bytes") == 2000000 * KB
    assert one(fams, "sysprof_memory_used_bytes_max") == 7000000 * KB
    assert one(fams, "sysprof_memory_used_bytes_min") == 2000000 * KB
    assert one(fams, "sysprof_memory_available_bytes_min") == 1000000 * KB
    assert one(again, "sysprof_memory_used_bytes_max") == 7000000 * KB  # a second scraper sees it too


def test_sysprof_serve_command():
    proc = subprocess.Popen(SYSPROF + ["serve", "--listen", "127.0.0.1:0", "--memory", "-i", "5ms"],
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        m = re.search(r"serving (http://127\.0\.0\.1:\d+/metrics) \(", line)
        assert m, line
        fams = parsed(scrape(m.group(1))[1])
        with open("/proc/meminfo") as f:
            total = int(re.search(r"MemTotal:\s+(\d+) kB", f.read()).group(1)) * KB
        assert one(fams, "sysprof_memory_total_bytes") == total
        assert "sysprof_cpu_busy_ratio" not in fams  # only the source asked for
        assert scrape(m.group(1)[: -len("metrics")])[0] == 404
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()


def test_sysprof_serve_errors_are_one_line():
    for args, rc in ((["--listen", "somehost"], 2), (["--listen", "127.0.0.1:99999"], 2), (["--process"], 2)):
        assert_one_line_error(run_cli("serve", *args, "--duration", "1s"), rc)
    assert "--listen" in run_cli("serve", "--help").stdout


def test_system_profiler_serves_what_it_drains(monkeypatch, recording_handler):
    sampler = FakeSampler(("memory/used_bytes", "memory/used_percent"))
    monkeypatch.setattr(SystemProfiler, "_make_sampler", lambda self: sampler)
    with pytest.raises(ValueError, match="listen"):
        SystemProfiler(prometheus_listen="nowhere")
    prof = Profiler(schedule=lambda s: "active", trace_handlers=[recording_handler], sys_prof_memory=True)
    sysp = prof.system_profiler
    sysp.prometheus_listen = "127.0.0.1:0"
    prof.start()
    ep = sysp._endpoint
    assert ep is not None and not ep.drains
    now = time.time_ns()
    sampler.rows = [(now, [3e9, 75.0]), (now + 1000000, [1e9, 25.0])]
    sysp._drain()
    fams = parsed(scrape(ep.url)[1])
    assert one(fams, "sysprof_memory_used_bytes") == 1e9 and one(fams, "sysprof_memory_used_bytes_max") == 3e9
    assert one(fams, "sysprof_memory_used_ratio_samples_count") == 2
    assert one(fams, "sysprof_memory_used_ratio_samples_sum") == 1.0
    assert [kw["values"] for kind, kw in recording_handler.calls if kind == "counter"][:1] == [{"used_gb": 3.0}]
    prof.stop()
    assert sysp._endpoint is None
    with pytest.raises(OSError):
        scrape(ep.url)


def test_system_profiler_goes_on_when_the_port_is_taken(monkeypatch, recording_handler, caplog):
    """Two ranks on a node asking for the same port: the second one's training is not stopped, it logs."""
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        sampler = FakeSampler(("memory/used_bytes",))
        monkeypatch.setattr(SystemProfiler, "_make_sampler", lambda self: sampler)
        prof = Profiler(schedule=lambda s: "active", trace_handlers=[recording_handler], sys_prof_memory=True)
        sysp = prof.system_profiler
        sysp.prometheus_listen = f"127.0.0.1:{taken.getsockname()[1]}"
        prof.start()
        assert sysp._endpoint is None and sampler.running
        assert "no Prometheus endpoint on 127.0.0.1:" in caplog.text
        prof.stop()
    finally:
        taken.close()
