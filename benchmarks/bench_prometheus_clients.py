"""The Prometheus endpoint under hostile clients (issue 26, item 7): run it with one interpreter or several, e.g.

    python benchmarks/bench_prometheus_clients.py /work/main/.venv/bin/python .venv/bin/python

For each interpreter (its installed sysprof, or the one PYTHONPATH gives it), a server process serves a 1 kHz
native sampler over the synthetic tree of bench_prometheus.py (198 channels) on loopback, with a collector of
its own that counts the scrapes it serves (``bench_collections``). Against it, from this process:

* held: N connections that send a request line and one header, never the blank line ending the head, and wait;
  the server's threads (``/proc/PID/task``, the most seen) while they are held, and a real scrape's latency then;
* closed: the collections those N connections cause when they are closed (the count before and after, once it
  has settled), and the latency of a scrape made right after closing them;
* slowloris: N clients that send one byte of a header every second and connect again whenever dropped; a real
  scrape's latency while they run (median and max of ``SCRAPES``, each on a new connection, 60 s timeout).

Every loop is bounded in count and time; only 127.0.0.1 is contacted.
"""
from __future__ import annotations

import os
import re
import selectors
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from typing import List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
N = 500
SCRAPES = 20
PARTIAL = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"  # no blank line: the head never ends

SERVER = r"""
import sys, tempfile
sys.path.insert(0, sys.argv[1])
import sysprof
from prometheus_client.core import GaugeMetricFamily
from sysprof.prometheus import PrometheusEndpoint
from bench_prometheus import _sampler, _tree

class Count:
    n = 0
    def describe(self):
        return []
    def collect(self):
        Count.n += 1
        yield GaugeMetricFamily("bench_collections", "collections served", value=Count.n)

with tempfile.TemporaryDirectory() as root:
    proc, sys_ = _tree(root)
    s = _sampler(sysprof, proc, sys_)
    s.start()
    ep = PrometheusEndpoint(s, listen="127.0.0.1:0")
    ep.registry.register(Count())
    print(ep.port, flush=True)
    sys.stdin.read()
    ep.stop()
    s.stop()
"""


def _scrape(url: str):
    """(seconds, collections so far) of one GET, or (None, None) when it failed."""
    t = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            body = r.read().decode()
    except OSError:
        return None, None
    m = re.search(r"^bench_collections (\S+)$", body, re.M)
    return time.perf_counter() - t, int(float(m.group(1))) if m else None


def _threads(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return -1


def _connect(port: int) -> Optional[socket.socket]:
    s = socket.socket()
    s.settimeout(5)
    try:
        s.connect(("127.0.0.1", port))
        s.sendall(PARTIAL)
    except OSError:
        s.close()
        return None
    return s


def _slowloris(port: int, n: int, stop: threading.Event, stats: dict) -> None:
    """n clients, each sending one header byte a second; a dropped one connects again (until ``stop``)."""
    sel = selectors.DefaultSelector()
    live: List[socket.socket] = []
    next_byte = time.monotonic()
    deadline = time.monotonic() + 300
    while not stop.is_set() and time.monotonic() < deadline:
        while len(live) < n and not stop.is_set():
            s = _connect(port)
            if s is None:
                stats["failed"] += 1
                break
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ)
            live.append(s)
            stats["connects"] += 1
        for key, _ in sel.select(0.05):  # anything readable: the server answered or closed it
            s = key.fileobj
            sel.unregister(s)
            s.close()
            live.remove(s)
            stats["dropped"] += 1
        if time.monotonic() >= next_byte:
            next_byte += 1.0
            for s in list(live):
                try:
                    s.send(b"X")
                except OSError:
                    sel.unregister(s)
                    s.close()
                    live.remove(s)
                    stats["dropped"] += 1
    for s in live:
        s.close()
    sel.close()


def _median(xs):
    """The median of those that did not fail (None), or None."""
    xs = sorted(x for x in xs if x is not None)
    return xs[len(xs) // 2] if xs else None


def _fmt(x) -> str:
    return "failed" if x is None else f"{x * 1000:.1f} ms"


def run(python: str, n: int = N) -> dict:
    server = subprocess.Popen([python, "-c", SERVER, HERE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              cwd=HERE, text=True)  # not the checkout's sysprof: the interpreter's
    out = {"python": python}
    try:
        port = int(server.stdout.readline())
        url = f"http://127.0.0.1:{port}/metrics"
        out["threads_idle"] = _threads(server.pid)
        out["scrape_idle"] = _median([_scrape(url)[0] for _ in range(SCRAPES)])
        held = [s for s in (_connect(port) for _ in range(n)) if s is not None]
        out["held"] = len(held)
        seen = 0
        for _ in range(20):  # 2 s
            seen = max(seen, _threads(server.pid))
            time.sleep(0.1)
        out["threads_held"] = seen
        lat = [_scrape(url)[0] for _ in range(SCRAPES)]
        out["scrape_held"] = _median(lat)
        _, before = _scrape(url)
        for s in held:
            s.close()
        out["scrape_after_close"] = _scrape(url)[0]  # while the server answers what the closes left it
        last, ours, t_end = before, 0, time.monotonic() + 120
        while before is not None and time.monotonic() < t_end:  # until only our own scrape adds one
            time.sleep(1.0)
            _, now = _scrape(url)
            if now is None:
                continue
            ours += 1
            settled, last = now == last + 1, now
            if settled:
                break
        out["collections_on_close"] = None if before is None else last - before - ours - 1
        stop, stats = threading.Event(), {"connects": 0, "dropped": 0, "failed": 0}
        t = threading.Thread(target=_slowloris, args=(port, n, stop, stats))
        t.start()
        t_end = time.monotonic() + 60
        while stats["connects"] < n and time.monotonic() < t_end:  # all N have connected once
            time.sleep(0.1)
        time.sleep(2.0)
        lat, seen = [], 0
        for _ in range(SCRAPES):
            lat.append(_scrape(url)[0])
            seen = max(seen, _threads(server.pid))
        stop.set()
        t.join(60)
        out["threads_slowloris"] = seen
        out["scrape_slowloris"] = _median(lat)
        out["scrape_slowloris_max"] = None if None in lat else max(lat)
        out["scrapes_failed"] = lat.count(None)
        out["slowloris"] = dict(stats)
    finally:
        server.stdin.close()
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    return out


def main(argv: List[str]) -> None:
    for python in argv or [sys.executable]:
        r = run(python)
        print(f"{r['python']}: idle {r['threads_idle']} threads, scrape {_fmt(r['scrape_idle'])}; "
              f"{r['held']} half-open held: {r['threads_held']} threads, scrape {_fmt(r['scrape_held'])}; "
              f"closing them: {r['collections_on_close']} collections, a scrape then "
              f"{_fmt(r['scrape_after_close'])}; {N} slowloris clients: "
              f"{r['threads_slowloris']} threads, scrape median {_fmt(r['scrape_slowloris'])} "
              f"max {_fmt(r['scrape_slowloris_max'])}, {r['scrapes_failed']} failed ({r['slowloris']})", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
