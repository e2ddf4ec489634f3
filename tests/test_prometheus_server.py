"""The Prometheus endpoint's HTTP server under hostile clients (issue 26, item 7): half-open connections hold no
thread and cost no collection, a slow head is cut off unanswered, the connection cap holds (503 when every
connection is being answered), an oversized head gets 431, HEAD answers without a body.

Collections are counted by a collector registered beside the endpoint's; no timing is asserted (every wait is
bounded in count, and only its outcome is checked)."""
from __future__ import annotations

import socket
import threading
import urllib.error
import urllib.request

import pytest

pytest.importorskip("prometheus_client")

from sysprof.prometheus import PrometheusEndpoint  # noqa: E402

from prometheus_support import FakeSampler, parsed, scrape  # noqa: E402

CHANNELS = ("cpu/percent", "memory/used_bytes", "gpu/0/utilization_percent")
PARTIAL = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"  # a request whose head never ends


@pytest.fixture
def endpoint():
    made = []

    def make(**kw):
        made.append(PrometheusEndpoint(FakeSampler(CHANNELS), listen="127.0.0.1:0", **kw))
        return made[-1]
    yield make
    for ep in made:
        ep.stop()


def test_bad_limits():
    for bad in (0, 10001, 2.0, True):
        with pytest.raises(ValueError, match="max_connections"):
            PrometheusEndpoint(FakeSampler(CHANNELS), listen="127.0.0.1:0", max_connections=bad)
    for bad in (0, -1.0, float("nan"), "5"):
        with pytest.raises(ValueError, match="header_timeout"):
            PrometheusEndpoint(FakeSampler(CHANNELS), listen="127.0.0.1:0", header_timeout=bad)


class CountingCollector:
    """Registered beside the endpoint's collector: counts the collections (scrapes) the server makes."""

    def __init__(self):
        self.n = 0

    def describe(self):
        return []

    def collect(self):
        self.n += 1
        return iter(())


def counted(ep):
    c = CountingCollector()
    ep.registry.register(c)
    return c


def half_open(ep, n):
    """n connections that sent PARTIAL (a connection the server closed at once is fine too)."""
    out = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", ep.port), timeout=30)
        try:
            s.sendall(PARTIAL)
        except OSError:
            pass
        out.append(s)
    return out


def closed_by_server(s, trickle: bool, rounds: int = 600) -> bool:
    """True once the server has closed ``s`` (EOF or reset), sending it one header byte per round when
    ``trickle`` (a slowloris); gives up after ``rounds`` rounds of at most 0.1 s."""
    s.settimeout(0.1)
    for _ in range(rounds):
        try:
            if trickle:
                s.sendall(b"X")
            if s.recv(4096) == b"":
                return True
        except socket.timeout:
            continue
        except OSError:
            return True
    return False


def test_half_open_connections_hold_no_thread_and_a_scrape_gets_through(endpoint):
    ep = endpoint()
    collections, threads = counted(ep), threading.active_count()
    held = half_open(ep, 100)  # more than the 64 connections the server keeps
    try:
        status, text = scrape(ep.url)  # connected after all of them: the server has taken each one
        assert status == 200 and "sysprof_window_seconds" in parsed(text)
        assert threading.active_count() <= threads + 1  # was one thread per connection: +100
        assert collections.n == 1
    finally:
        for s in held:
            s.close()


def test_closing_half_open_connections_collects_nothing(endpoint):
    ep = endpoint()
    collections = counted(ep)
    for s in half_open(ep, 50):
        s.close()  # was: each unfinished head read to its end and served, a collection apiece
    for _ in range(2):
        assert scrape(ep.url)[0] == 200
    assert collections.n == 2


@pytest.mark.parametrize("trickle", [False, True], ids=["silent", "one-byte-at-a-time"])
def test_a_slow_head_is_cut_off_unanswered(endpoint, trickle):
    ep = endpoint(header_timeout=0.5)
    collections = counted(ep)
    (s,) = half_open(ep, 1)
    try:
        assert closed_by_server(s, trickle)
    finally:
        s.close()
    assert collections.n == 0
    assert scrape(ep.url)[0] == 200 and collections.n == 1


def test_at_the_cap_with_every_connection_being_answered_a_new_one_gets_503(endpoint):
    ep = endpoint(max_connections=2)
    collections = counted(ep)
    big = {"on": True}

    class Big:  # an answer of 8 MB, more than loopback's buffers hold for a client that reads nothing
        def describe(self):
            return []

        def collect(self):
            if big["on"]:
                from prometheus_client.core import GaugeMetricFamily

                g = GaugeMetricFamily("test_big", "a large answer", labels=["x"])
                g.add_metric(["a" * 8_000_000], 1.0)
                yield g

    ep.registry.register(Big())
    stalled = []
    try:
        for k in (1, 2):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.settimeout(30)
            s.connect(("127.0.0.1", ep.port))
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            stalled.append(s)
            for _ in range(600):  # at most 60 s: the server has collected its answer
                if collections.n >= k:
                    break
                threading.Event().wait(0.1)
            assert collections.n == k
        with socket.create_connection(("127.0.0.1", ep.port), timeout=30) as s:
            assert s.recv(64).startswith(b"HTTP/1.1 503 ")
        assert collections.n == 2
    finally:
        for s in stalled:
            s.close()
    big["on"] = False
    for _ in range(100):  # at most 100 tries: the server may see the two go after it takes the next connection
        try:
            if scrape(ep.url)[0] == 200:
                break
        except OSError:  # refused: its 503 may come as a reset
            pass
    assert collections.n == 3


def test_an_oversized_head_gets_431_and_head_answers_without_a_body(endpoint):
    ep = endpoint()
    collections = counted(ep)
    req = urllib.request.Request(ep.url, headers={"X-Big": "a" * 100_000})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=30)
    assert e.value.code == 431 and collections.n == 0
    with urllib.request.urlopen(urllib.request.Request(ep.url, method="HEAD"), timeout=30) as r:
        assert r.status == 200 and r.read() == b"" and int(r.headers["Content-Length"]) > 0
        assert r.headers["Content-Type"].startswith("text/plain")
    assert collections.n == 1
