"""Benchmark section: the caller's cost of sysprof.mark / sysprof.mark_instant (sysprof/markers/).

Each case runs in a child process (the markers read SYSPROF_MARKERS at import): without a recorder (the no-op),
and with a receiver draining every 0.2 s in this process, as ``sysprof record`` does. Three figures per call:
``alone`` times each call with a perf_counter_ns pair (its p99 shows preemption and page faults; the pair
itself is the ``timer`` row), ``loop`` is the mean of back-to-back calls over chunks of 1000 (median and p99
over chunks; no timer inside), as wall time and as the thread's CPU time (``thread_time_ns``: on a shared
machine, without the time other processes ran). For the choice of transport, the same record sent as one non-blocking Unix
SOCK_SEQPACKET message per marker (the design not taken) is timed the same way. Each recording case runs
twice where the extension is built: with the Python writer (SYSPROF_MARKERS_NATIVE=0, as on a machine without
the extension) and with the native one (csrc/markers/)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any, Dict

from bench_util import dist, fd, fmt, table

DEFAULT = (200_000, 1000)  # calls per case, calls per loop chunk

_CHILD = r"""
import json, socket, struct, sys, time
import sysprof
pc, tt = time.perf_counter_ns, time.thread_time_ns
n, chunk = int(sys.argv[1]), int(sys.argv[2])
cases = json.loads(sys.argv[3])

def one_with():
    with sysprof.mark("step"):
        pass

hoisted = sysprof.mark("step")

def one_hoisted():
    with hoisted:
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

def drain():  # between timed stretches, untimed: the ring never fills, so every call writes a record
    global reader
    ring = sysprof.markers._producer.ring if sysprof.markers.enabled() else None
    if ring is not None:
        from sysprof.markers.ring import RingReader
        if reader is None:
            reader = RingReader(ring.path)
        reader.read()
    if peer is not None:
        try:
            while True:
                peer.recv(512)
        except BlockingIOError:
            pass

reader = sock = peer = None
if "seqpacket" in cases:  # the same record as one message on a connected socket, drained the same way
    sock, peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    peer.setblocking(False)
    head = struct.Struct("@qqQ")
    send, tns, name, flag = sock.send, time.time_ns, b"step", socket.MSG_DONTWAIT
    def one_seqpacket():
        try:
            send(head.pack(0, tns(), 1) + name, flag)
        except OSError:
            pass

fns = {"timer": plain, "with": one_with, "hoisted": one_hoisted, "instant": one_instant, "instant_args": one_args, "decorated": fn,
       "seqpacket": sock and one_seqpacket}
out = {}
for case in cases:
    f = fns[case]
    for _ in range(1000):
        f()
    drain()
    alone = []
    for _ in range(max(1, n // 2 // chunk)):
        for _ in range(chunk):
            t0 = pc(); f(); alone.append(pc() - t0)
        drain()
    loops, cpu = [], []
    for _ in range(max(1, n // 2 // chunk)):
        c0, t0 = tt(), pc()
        for _ in range(chunk):
            f()
        t1, c1 = pc(), tt()
        loops.append((t1 - t0) / chunk)
        cpu.append((c1 - c0) / chunk)
        drain()
    out[case] = {"alone": alone, "loop": loops, "cpu": cpu}
out["dropped"] = sysprof.markers.dropped()
out["native"] = bool(sysprof.markers.enabled() and sysprof.markers._producer.ring.native)
out["enabled"] = sysprof.markers.enabled()
print(json.dumps(out))
"""


def _child(cases, n, chunk, env_extra):
    env = {k: v for k, v in os.environ.items() if k != "SYSPROF_MARKERS"}
    env.update(env_extra)
    r = subprocess.run([sys.executable, "-c", _CHILD, str(n), str(chunk), json.dumps(cases)],
                       capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())  # not the checkout
    if r.returncode != 0:
        raise RuntimeError(f"bench_mark's child failed: {r.stderr.strip()[-2000:]}")
    return json.loads(r.stdout)


def bench_mark(cfg, sysprof) -> Dict[str, Any]:
    from sysprof.markers.receiver import MarkerReceiver
    from sysprof.markers.ring import NATIVE_ENV, _native_writer

    n, chunk = cfg.get("mark", DEFAULT)
    out: Dict[str, Any] = {"n": n, "chunk": chunk}
    off = _child(["timer", "with", "hoisted", "instant", "decorated"], n, chunk, {})
    writers = ["python"] + (["native"] if _native_writer() is not None else [])
    runs = {}
    rec = MarkerReceiver()  # the markers' directory; the child reads its own ring between chunks
    try:
        for w in writers:
            cases = ["timer", "with", "hoisted", "instant", "instant_args", "decorated"]
            runs[w] = _child(cases + (["seqpacket"] if w == "python" else []), n, chunk,
                             {rec.env[0]: rec.env[1], NATIVE_ENV: "1" if w == "native" else "0"})
    finally:
        rec.close()
    def summary(d):
        return {"alone_ns": dist(d["alone"], "ns"), "loop_ns": dist(d["loop"], "ns"),
                "loop_cpu_ns": dist(d["cpu"], "ns")}

    out["off"] = {k: summary(v) for k, v in off.items() if isinstance(v, dict)}
    for w, on in runs.items():
        out[f"on_{w}"] = {k: summary(v) for k, v in on.items() if isinstance(v, dict)}
        out[f"on_{w}_dropped"] = on["dropped"]
        out[f"on_{w}_used_native"] = on["native"]
    out["writers"] = writers
    return out


_LABELS = {"timer": "timer pair / empty call", "with": "with mark(name): (begin + end)",
           "hoisted": "with m: (m = mark(name) made once)",
           "instant": "mark_instant(name)", "instant_args": "mark_instant(name, i=1)",
           "decorated": "@mark(name) call (begin + end)", "seqpacket": "SOCK_SEQPACKET send (design not taken)"}


def print_mark(res) -> str:
    rows = []
    states = [("off", "no recorder")] + [(f"on_{w}", f"recording, {w} writer") for w in res["writers"]]
    for state, label in states:
        base = res[state]["timer"]["loop_cpu_ns"]["median"]
        for case, d in res[state].items():
            net = d["loop_cpu_ns"]["median"] - base if case != "timer" else None
            rows.append([label, _LABELS[case], fmt(net), fd(d["loop_cpu_ns"]), fd(d["loop_ns"]), fd(d["alone_ns"])])
    return ("## Markers: the caller's cost (ns per call)\n\n"
            + table(["state", "call", "net CPU", "loop, thread CPU per call", "loop, wall per call",
                     "each call timed alone (wall)"], rows)
            + f"\n\nnet CPU: the loop's CPU median less the empty call's of the same run (each case is a call "
              f"of a small function doing it). {res['n']:,} calls per case in a child process, half timed alone, half in loops of "
              f"{res['chunk']}; the child reads its own ring between stretches (untimed), so every call writes "
              f"a record ({', '.join(str(res[f'on_{w}_dropped']) for w in res['writers'])} dropped); the "
              f"SOCK_SEQPACKET row sends the same record on a connected socket pair, drained the same way. The "
              f"native writer (csrc/markers/) is used where the extension is built; "
              f"SYSPROF_MARKERS_NATIVE=0 picks the Python one.\n")


if __name__ == "__main__":  # python benchmarks/bench_mark.py [--quick]
    import sysprof

    quick = "--quick" in sys.argv
    print(print_mark(bench_mark({"mark": (20_000, 1000)} if quick else {}, sysprof)))
