"""Benchmark section: the caller's cost of sysprof.mark / sysprof.mark_instant (sysprof/markers/).

Each case runs in a child process (the markers read SYSPROF_MARKERS at import): without a recorder (the no-op),
and with a receiver draining every 0.2 s in this process, as ``sysprof record`` does. Two figures per call:
``alone`` times each call with a perf_counter_ns pair (its p99 shows preemption and page faults; the pair
itself is the ``timer`` row), ``loop`` is the mean of back-to-back calls over chunks of 1000 (median and p99
over chunks; no timer inside). For the choice of transport, the same record sent as one non-blocking Unix
SOCK_SEQPACKET message per marker (the design not taken) is timed the same way. The markers are pure Python
(no native code), so the figures are the same with and without the extension."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from typing import Any, Dict

from bench_util import dist, fd, table

DEFAULT = (200_000, 1000)  # calls per case, calls per loop chunk

_CHILD = r"""
import json, socket, struct, sys, time
import sysprof
pc = time.perf_counter_ns
n, chunk = int(sys.argv[1]), int(sys.argv[2])
cases = json.loads(sys.argv[3])

def one_with():
    with sysprof.mark("step"):
        pass

def one_instant():
    sysprof.mark_instant("step")

def one_args():
    sysprof.mark_instant("step", i=1)

@sysprof.mark("fn")
def fn():
    pass

def plain():
    pass

sock = None
if "seqpacket" in cases:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.connect(sys.argv[4].encode("latin-1"))
    head = struct.Struct("@qqIBBHH")
    send, tns, name = sock.send, time.time_ns, b"step"
    def one_seqpacket():
        try:
            send(head.pack(0, tns(), 1, 1, 0, 4, 0) + name, socket.MSG_DONTWAIT)
        except OSError:
            pass

fns = {"timer": plain, "with": one_with, "instant": one_instant, "instant_args": one_args, "decorated": fn,
       "seqpacket": sock and one_seqpacket}
out = {}
for case in cases:
    f = fns[case]
    for _ in range(2000):
        f()
    alone = []
    for _ in range(n // 2):
        t0 = pc(); f(); alone.append(pc() - t0)
    loops = []
    for _ in range(max(1, n // 2 // chunk)):
        t0 = pc()
        for _ in range(chunk):
            f()
        loops.append((pc() - t0) / chunk)
    out[case] = {"alone": alone, "loop": loops}
out["dropped"] = sysprof.markers.dropped()
out["enabled"] = sysprof.markers.enabled()
print(json.dumps(out))
"""


def _child(cases, n, chunk, env_extra, sock_addr=""):
    env = {k: v for k, v in os.environ.items() if k != "SYSPROF_MARKERS"}
    env.update(env_extra)
    r = subprocess.run([sys.executable, "-c", _CHILD, str(n), str(chunk), json.dumps(cases), sock_addr],
                       capture_output=True, text=True, env=env, check=True)
    return json.loads(r.stdout)


class _Drainer:
    """Calls ``fn`` every 0.2 s on a thread, as the recorder's loop drains."""

    def __init__(self, fn):
        self.fn, self.stop = fn, threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while not self.stop.wait(0.2):
            self.fn()

    def close(self):
        self.stop.set()
        self.t.join()
        self.fn()


def _seqpacket_receiver():
    import socket

    addr = f"\0sysprof-bench-mark-{os.getpid()}-{time.time_ns()}"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    srv.bind(addr.encode("latin-1"))
    srv.listen(4)
    conns, got = [], [0]

    def drain():
        srv.setblocking(False)
        try:
            while True:
                c, _ = srv.accept()
                c.setblocking(False)
                conns.append(c)
        except BlockingIOError:
            pass
        for c in conns:
            try:
                while True:
                    if not c.recv(512):
                        break
                    got[0] += 1
            except BlockingIOError:
                pass
    return addr, srv, conns, drain, got


def bench_mark(cfg, sysprof) -> Dict[str, Any]:
    from sysprof.markers.receiver import MarkerReceiver

    n, chunk = cfg.get("mark", DEFAULT)
    out: Dict[str, Any] = {"n": n, "chunk": chunk, "native_used": False}
    off = _child(["timer", "with", "instant", "decorated"], n, chunk, {})
    rec = MarkerReceiver(lambda ns: ns)
    got = [0]
    drainer = _Drainer(lambda: got.__setitem__(0, got[0] + len(rec.drain())))
    try:
        on = _child(["timer", "with", "instant", "instant_args", "decorated"], n, chunk, {rec.env[0]: rec.env[1]})
    finally:
        drainer.close()
        rec_stats = rec.stats()
        rec.close()
    addr, srv, conns, drain, sp_got = _seqpacket_receiver()
    sp_drainer = _Drainer(drain)
    try:
        sp = _child(["seqpacket"], n, chunk, {}, sock_addr=addr)
    finally:
        sp_drainer.close()
        for c in conns:
            c.close()
        srv.close()
    def summary(d):
        return {"alone_ns": dist(d["alone"], "ns"), "loop_ns": dist(d["loop"], "ns")}

    out["off"] = {k: summary(v) for k, v in off.items() if isinstance(v, dict)}
    out["on"] = {k: summary(v) for k, v in on.items() if isinstance(v, dict)}
    out["on"]["seqpacket"] = summary(sp["seqpacket"])
    out["on_dropped"] = on["dropped"]
    out["receiver"] = rec_stats
    out["seqpacket_received"] = sp_got[0]
    return out


_LABELS = {"timer": "timer pair / empty call", "with": "with mark(name): (begin + end)",
           "instant": "mark_instant(name)", "instant_args": "mark_instant(name, i=1)",
           "decorated": "@mark(name) call (begin + end)", "seqpacket": "SOCK_SEQPACKET send (design not taken)"}


def print_mark(res) -> str:
    rows = []
    for state in ("off", "on"):
        for case, d in res[state].items():
            rows.append([("no recorder" if state == "off" else "recording"), _LABELS[case], fd(d["loop_ns"]),
                         fd(d["alone_ns"])])
    r = res["receiver"]
    return ("## Markers: the caller's cost (ns per call)\n\n"
            + table(["state", "call", "loop mean per call: median (p99 over chunks)",
                     "each call timed alone: median (p99)"], rows)
            + f"\n\n{res['n']:,} calls per case in a child process; loop chunks of {res['chunk']}; the "
              f"receiver drained every 0.2 s: {r['markers']:,} markers received, {r['markers_dropped']:,} "
              f"dropped (the child counted {res['on_dropped']:,}); SOCK_SEQPACKET: "
              f"{res['seqpacket_received']:,} received. Pure Python: the same with and without the native "
              f"extension.\n")


if __name__ == "__main__":  # python benchmarks/bench_mark.py [--quick]
    import sysprof

    quick = "--quick" in sys.argv
    print(print_mark(bench_mark({"mark": (20_000, 1000)} if quick else {}, sysprof)))
