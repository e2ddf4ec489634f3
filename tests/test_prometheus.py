"""The Prometheus endpoint: names and types from the registry, exact values scraped over loopback and parsed with
prometheus_client's parser, the sliding window (a one-row burst), the ratio histograms, 404s, loopback default.

Rows come from a fake sampler (exact synthetic rows, a fake clock) or from the native sampler on a fixture /proc
tree (tests/fixtures/full), whose files give literal values."""
from __future__ import annotations

import math
import re
import sys
import urllib.error
import urllib.request

import numpy as np
import pytest

pytest.importorskip("prometheus_client")

from sysprof.prometheus import DEFAULT_LISTEN, PrometheusEndpoint, parse_listen  # noqa: E402
from sysprof.prometheus.names import all_metrics, families, metric_of  # noqa: E402
from sysprof.prometheus.window import RATIO_BUCKETS, Window  # noqa: E402
from sysprof.sampling.registry import SOURCES, channel_spec  # noqa: E402

from prometheus_support import FakeSampler, parsed, scrape  # noqa: E402

T0 = 1_700_000_000_000_000_000  # ns
MS, S = 1_000_000, 1_000_000_000
NAN = float("nan")


# ------------------------------------------------------------------ the names table

def test_names_types_and_labels_of_the_table():
    want = {"memory/used_bytes": ("sysprof_memory_used_bytes", "gauge", None, 1.0),
            "memory/used_percent": ("sysprof_memory_used_ratio", "gauge", None, 100.0),
            "disk/<dev>/read_bytes": ("sysprof_disk_read_bytes", "counter", "device", 1.0),
            "disk/<dev>/busy_time_seconds_per_second": ("sysprof_disk_busy_time_ratio", "gauge", "device", 1.0),
            "net/<nic>/bytes_recv": ("sysprof_net_bytes_recv", "counter", "device", 1.0),
            "cpu/percent": ("sysprof_cpu_busy_ratio", "gauge", None, 100.0),
            "cpu/<id>/percent": ("sysprof_cpu_core_busy_ratio", "gauge", "cpu", 100.0),
            "cpu/user_percent": ("sysprof_cpu_user_ratio", "gauge", None, 100.0),
            "process_tree/<slot>/rss_bytes": ("sysprof_process_tree_member_rss_bytes", "gauge", "slot", 1.0),
            "process/cpu_seconds_total": ("sysprof_process_cpu_seconds", "counter", None, 1.0),
            "pressure/io/some_seconds_per_second": ("sysprof_pressure_io_some_ratio", "gauge", None, 1.0),
            "gpu/<index>/energy_joules": ("sysprof_gpu_energy_joules", "counter", "gpu", 1.0),
            "gpu/<index>/sm_clock_hz": ("sysprof_gpu_sm_clock_hertz", "gauge", "gpu", 1.0),
            "gpu/<index>/utilization_percent": ("sysprof_gpu_utilization_ratio", "gauge", "gpu", 100.0),
            "load/1m": ("sysprof_load_1m", "gauge", None, 1.0),
            "load/procs_total": ("sysprof_load_procs", "gauge", None, 1.0)}
    specs = {c.pattern: c for s in SOURCES.values() for c in s.channels}
    for pattern, (name, kind, label, divisor) in want.items():
        m = metric_of(specs[pattern])
        assert (m.name, m.type, m.label, m.divisor) == (name, kind, label, divisor), pattern
    assert metric_of(specs["disk/<dev>/read_bytes"]).exposed == "sysprof_disk_read_bytes_total"


def test_every_exposed_name_is_valid_and_unique():
    seen = {}
    for m in all_metrics():
        names = [m.exposed] if m.type == "counter" else [m.name, m.name + "_max", m.name + "_min"]
        if m.ratio and m.type == "gauge":
            names += [m.name + "_samples" + s for s in ("_bucket", "_sum", "_count")]
        for n in names:
            assert re.fullmatch(r"sysprof_[a-z0-9_]+", n) and "__" not in n, n
            assert n not in seen, (n, m.pattern, seen.get(n))
            assert not n.endswith("_percent") and "_hz" not in n, n
            if m.type == "gauge" and "_samples_" not in n:
                assert not re.search(r"_(total|count|sum|bucket)$", n), n
            seen[n] = m.pattern
    assert len(seen) > 200


def test_families_gather_devices_as_labels():
    chans = ("disk/sda/read_bytes", "disk/nvme0n1/read_bytes", "gpu/1/power_watts", "mystery/x")
    fams = families(chans, [{"index": 1, "uuid": "GPU-b"}])
    assert [(f.metric.name, f.labels, f.columns, f.values) for f in fams] == [
        ("sysprof_disk_read_bytes", ("device",), [0, 1], [("sda",), ("nvme0n1",)]),
        ("sysprof_gpu_power_watts", ("gpu", "uuid"), [2], [("1", "GPU-b")])]
    assert channel_spec("mystery/x") is None


# ------------------------------------------------------------------ the window

def test_window_extremes_slide_and_histograms_count():
    clock = {"t": T0 + 10 * S}
    w = Window(2, window=15.0, slots=15, hist_columns=[1], clock=lambda: clock["t"])
    ts = np.array([T0 + 10 * S + k * MS for k in range(5)], dtype=np.int64)
    w.fold(ts, np.array([[1.0, 0.25], [9.0, 0.5], [1.0, NAN], [2.0, 0.75], [NAN, 1.0]]))
    hi, lo = w.extremes()
    assert (hi.tolist(), lo.tolist()) == ([9.0, 1.0], [1.0, 0.25])
    counts, count, total = w.histograms()
    # le 0.05 0.1 0.25 0.5 0.75 0.9 0.95 0.99 1.0
    assert counts.tolist() == [[0, 0, 1, 2, 3, 3, 3, 3, 4]] and count.tolist() == [4] and total.tolist() == [2.5]
    clock["t"] = T0 + 24 * S  # the rows' 1 s slot (10 s) is still within 15 s of 24 s
    assert w.extremes()[0].tolist() == [9.0, 1.0]
    clock["t"] = T0 + 25 * S  # now it is not
    assert all(math.isnan(v) for v in w.extremes()[0].tolist())
    w.fold(np.array([T0 + 3 * S], dtype=np.int64), np.array([[100.0, 0.0]]))  # too old for the window
    assert all(math.isnan(v) for v in w.extremes()[0].tolist())
    assert w.histograms()[1].tolist() == [5] and w.rows == 6


# ------------------------------------------------------------------ scraped over loopback

CHANNELS = ("cpu/percent", "memory/used_bytes", "disk/sda/read_bytes", "gpu/0/utilization_percent",
            "gpu/0/temperature_celsius", "cpu/3/percent")


@pytest.fixture
def endpoint():
    made = []

    def make(sampler, clock, **kw):
        made.append(PrometheusEndpoint(sampler, listen="127.0.0.1:0", clock=lambda: clock["t"], **kw))
        return made[-1]
    yield make
    for ep in made:
        ep.stop()


def test_scrape_exact_names_types_labels_values_and_a_burst(endpoint):
    s = FakeSampler(CHANNELS, [{"index": 0, "uuid": "GPU-abc", "name": "H100"}])
    clock = {"t": T0 + 2 * S}
    ep = endpoint(s, clock, window=15.0)
    # five 1 ms rows; memory bursts to 9e9 for one row, the last row is back at 1e9
    s.rows = [(T0 + S + k * MS, [c, m, 4096.0 * (k + 1), g, 40.0, c])
              for k, (c, m, g) in enumerate(((25.0, 1e9, 50.0), (50.0, 9e9, 100.0), (75.0, 1e9, NAN),
                                             (100.0, 1e9, 0.0), (NAN, 1e9, 25.0)))]
    status, text = scrape(ep.url)
    assert status == 200
    fams = parsed(text)
    gpu = (("gpu", "0"), ("uuid", "GPU-abc"))
    assert fams["sysprof_memory_used_bytes"] == ("gauge", {("sysprof_memory_used_bytes", ()): 1e9})
    assert fams["sysprof_memory_used_bytes_max"] == ("gauge", {("sysprof_memory_used_bytes_max", ()): 9e9})
    assert fams["sysprof_memory_used_bytes_min"] == ("gauge", {("sysprof_memory_used_bytes_min", ()): 1e9})
    assert fams["sysprof_disk_read_bytes"] == ("counter", {("sysprof_disk_read_bytes_total",
                                                            (("device", "sda"),)): 20480.0})
    assert fams["sysprof_cpu_busy_ratio"] == ("gauge", {})  # the newest row's is unknown: left out
    assert fams["sysprof_cpu_busy_ratio_max"][1] == {("sysprof_cpu_busy_ratio_max", ()): 1.0}
    assert fams["sysprof_cpu_busy_ratio_min"][1] == {("sysprof_cpu_busy_ratio_min", ()): 0.25}
    assert fams["sysprof_gpu_utilization_ratio"] == ("gauge", {("sysprof_gpu_utilization_ratio", gpu): 0.25})
    assert fams["sysprof_gpu_temperature_celsius"][1] == {("sysprof_gpu_temperature_celsius", gpu): 40.0}
    typ, hist = fams["sysprof_cpu_busy_ratio_samples"]
    assert typ == "histogram"
    les = [f"{b:g}" if b != 1.0 else "1.0" for b in RATIO_BUCKETS] + ["+Inf"]
    got = {dict(k[1])["le"]: v for k, v in hist.items() if k[0].endswith("_bucket")}
    assert [got[le] for le in les] == [0, 0, 1, 2, 3, 3, 3, 3, 4, 4]
    assert hist[("sysprof_cpu_busy_ratio_samples_count", ())] == 4
    assert hist[("sysprof_cpu_busy_ratio_samples_sum", ())] == 2.5
    gh = fams["sysprof_gpu_utilization_ratio_samples"][1]
    assert gh[("sysprof_gpu_utilization_ratio_samples_count", gpu)] == 4
    assert gh[("sysprof_gpu_utilization_ratio_samples_sum", gpu)] == 1.75
    assert fams["sysprof_sampler_rows"][1] == {("sysprof_sampler_rows_total", ()): 5}
    assert fams["sysprof_window_seconds"][1] == {("sysprof_window_seconds", ()): 15.0}
    assert "sysprof_gpu_temperature_celsius_samples" not in fams  # histograms are for ratios only
    assert fams["sysprof_cpu_core_busy_ratio_max"][1] == {("sysprof_cpu_core_busy_ratio_max", (("cpu", "3"),)): 1.0}
    assert "sysprof_cpu_core_busy_ratio_samples" not in fams  # ... and not per CPU
    # a second scraper sees the same burst (a scrape resets nothing); 16 s later it has left the window
    assert parsed(scrape(ep.url)[1])["sysprof_memory_used_bytes_max"][1] == {("sysprof_memory_used_bytes_max", ()): 9e9}
    clock["t"] = T0 + 17 * S
    later = parsed(scrape(ep.url)[1])
    assert later["sysprof_memory_used_bytes_max"][1] == {("sysprof_memory_used_bytes_max", ()): 1e9}
    assert later["sysprof_cpu_busy_ratio_samples"][1][("sysprof_cpu_busy_ratio_samples_count", ())] == 4


def test_only_metrics_is_served(endpoint):
    ep = endpoint(FakeSampler(CHANNELS), {"t": T0})
    base = ep.url[: -len("/metrics")]
    for path in ("/", "/metrics/", "/metrics/x", "/favicon.ico", "/debug"):
        assert scrape(base + path)[0] == 404, path
    req = urllib.request.Request(ep.url, data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=30)
    assert e.value.code == 405
    assert scrape(ep.url + "?name[]=sysprof_window_seconds")[0] == 200


def test_loopback_unless_an_address_is_given(endpoint):
    assert DEFAULT_LISTEN == "127.0.0.1:9464"
    assert parse_listen(DEFAULT_LISTEN) == ("127.0.0.1", 9464)
    assert parse_listen("9464") == parse_listen(":9464") == parse_listen(9464) == ("127.0.0.1", 9464)
    assert parse_listen("0.0.0.0:80") == ("0.0.0.0", 80)
    assert parse_listen("[::1]:9464") == ("::1", 9464)
    for bad in ("", "host", "::1:9464", "1.2.3.4:", "127.0.0.1:65536", True, None, "a b:1"):
        with pytest.raises(ValueError, match="listen"):
            parse_listen(bad)
    ep = endpoint(FakeSampler(CHANNELS), {"t": T0})
    assert ep.host == "127.0.0.1" and ep._server.server_address[0] == "127.0.0.1"
    assert ep.url == f"http://127.0.0.1:{ep.port}/metrics"


def test_bad_window_and_missing_client(monkeypatch):
    with pytest.raises(ValueError, match="window"):
        PrometheusEndpoint(FakeSampler(CHANNELS), listen="127.0.0.1:0", window=0)
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    with pytest.raises(ImportError, match=r"sysprof\[prometheus\]"):
        PrometheusEndpoint(FakeSampler(CHANNELS), listen="127.0.0.1:0")
