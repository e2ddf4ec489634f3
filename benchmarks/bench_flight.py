#!/usr/bin/env python3
"""The flight recorder (sysprof/flight.py, ``record --flight``): its memory per second of window, its RSS over a long
recording, the drain thread's extra CPU, and the cost of one dump.

    python benchmarks/bench_flight.py [--long SECONDS] [--window SECONDS] [--json PATH]

1. memory: per second of window, ``(8 + 8 x channels) / interval`` bytes (the ring's int64 time and float64 values
   per row), for ``record``'s default source set and ``--all`` at 1 ms and 10 ms; and the RSS a fresh process gains
   by making a 30 s recorder at 1 ms (the ring is written at construction: its pages are resident), against that.
2. feed: in this process, a Sampler with the default set at 1 ms drained every 0.2 s (as ``record``); per drain the
   thread CPU of ``FlightRecorder.feed`` with 20 marker step spans (``feed_events``), interleaved with what the
   same batch costs a full trace (``EventBuilder.events`` and the JSON encoding) and a second recorder that also
   writes the decimated trace (``trace_every_s``, ``--flight-trace``: 100 ms by default), so the ratios are of one
   run; the decimated trace's bytes per second of run (gzipped, on disk); then one dump of the full window, timed on
   its writer thread.
3. long: ``sysprof record --flight WINDOW -i 1ms`` of a program marking a step every 10 ms and calling
   ``sysprof.dump()`` every 20 s (``--flight-gap 20s``): the recorder's RSS every second (VmRSS), its CPU per
   second, the dumps (removed as they appear, so the disk does not fill). Flat: the RSS slope after the window
   has filled, in MB per minute, with the RSS's spread.
Absolute figures are this machine's (shared, noisy); the ratios are within one run.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_util import dist, fmt  # noqa: E402


def _sampler_kwargs(flags):
    """The Sampler keywords ``sysprof record FLAGS -- CMD`` uses (its default set, or ``--all``)."""
    from sysprof.cli.parser import build_parser
    from sysprof.cli.sources import _sources_from_args, sampler_kwargs

    args = build_parser().parse_args(["record", *flags, "--", "true"])
    return sampler_kwargs(_sources_from_args(args, True))


def _channels(flags, interval=1e-3):
    import sysprof

    return tuple(sysprof.Sampler(interval=interval, **_sampler_kwargs(flags)).channels)


_MADE = r"""
import json, sys, gc
sys.path.insert(0, sys.argv[1])
from bench_util import rss_bytes
from sysprof.flight import FlightOptions, FlightRecorder
n, interval, window = int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
gc.collect()
before = rss_bytes()
rec = FlightRecorder("/nonexistent", [f"c{i}" for i in range(n)], interval, FlightOptions(window_s=window,
                     memory_bytes=1 << 40))
print(json.dumps({"rss_bytes": rss_bytes() - before, "ring_bytes": rec.memory_bytes,
                  "bytes_per_second": rec.bytes_per_second}))
"""


def bench_memory(window: float = 30.0) -> dict:
    out = {}
    for label, flags in (("default", []), ("all", ["--all"])):
        n = len(_channels(flags))
        made = subprocess.run([sys.executable, "-c", _MADE, HERE, str(n), "0.001", str(window)], capture_output=True,
                              text=True, timeout=120)
        got = json.loads(made.stdout.strip().splitlines()[-1]) if made.returncode == 0 else {"error": made.stderr}
        out[label] = {"channels": n, "bytes_per_second_1ms": (8 + 8 * n) / 1e-3,
                      "bytes_per_second_10ms": (8 + 8 * n) / 1e-2, f"made_{window:g}s_at_1ms": got}
    return out


def bench_feed(seconds: float, window: float, steps_per_drain: int = 20, trace_every: float = 0.1) -> dict:
    """The flight feed against a full trace's rendering of the same batches and against the feed of a recorder that
    also writes the decimated trace, per drain (thread CPU)."""
    import sysprof
    from sysprof.flight import FlightOptions, FlightRecorder
    from sysprof.trace.chrome import encode_event
    from sysprof.trace.tracks import EventBuilder

    tt = time.thread_time_ns
    s = sysprof.Sampler(interval=1e-3, capacity=8192, **_sampler_kwargs([]))
    channels = tuple(s.channels)
    folder = tempfile.mkdtemp(prefix="bench-flight-")
    rec = FlightRecorder(folder, channels, 1e-3, FlightOptions(window_s=window, min_gap_s=0), pid=os.getpid(),
                         notify=lambda line: None)
    traced = FlightRecorder(os.path.join(folder, "traced"), channels, 1e-3,
                            FlightOptions(window_s=window, min_gap_s=0, trace_every_s=trace_every), pid=os.getpid(),
                            notify=lambda line: None)
    builder = EventBuilder(channels, system_pid=os.getpid())
    feed, trace, decimated, rows, drains = [], [], [], 0, 0
    s.start()
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < seconds:
            time.sleep(0.2)
            batch = s.drain()
            now = time.time_ns()
            events = []
            for k in range(steps_per_drain):  # 10 ms steps as sysprof.mark() spans
                a = now - (steps_per_drain - k) * 10_000_000
                events += [{"name": "step", "cat": "sysprof.mark", "ph": "B", "ts": a // 1000, "pid": 1, "tid": 1},
                           {"name": "step", "cat": "sysprof.mark", "ph": "E", "ts": (a + 9_000_000) // 1000,
                            "pid": 1, "tid": 1}]
            c = tt()
            rec.feed_events(events)
            rec.feed(batch)
            feed.append(tt() - c)
            c = tt()
            traced.feed_events(events)
            traced.feed(batch)
            decimated.append(tt() - c)
            c = tt()
            for e in builder.events(batch):
                encode_event(e)
            trace.append(tt() - c)
            rows += len(batch)
            drains += 1
        elapsed = time.monotonic() - t0
        c = tt()
        traced.close()
        closing_us = (tt() - c) / 1e3
        traced_info = traced.trace or {}
        # one dump of the full window, on its writer thread
        rec.trigger("signal", "bench", time.time_ns() - int(rec.after_ns) - 2 * 10**9)
        c0, w0 = time.process_time(), time.monotonic()
        rec.feed(s.drain())
        rec.close(timeout=600)
        dump_wall, dump_cpu = time.monotonic() - w0, time.process_time() - c0
    finally:
        s.stop()
    written = rec.written[0] if rec.written else {}
    for d in rec.written:
        os.unlink(d["path"])
    if traced_info.get("path"):
        os.unlink(traced_info["path"])
        os.rmdir(os.path.join(folder, "traced"))
    os.rmdir(folder)
    per_s = lambda ns: sum(ns) / 1e6 / elapsed  # noqa: E731 - ms of CPU per second recorded
    return {"channels": len(channels), "seconds": elapsed, "drains": drains, "rows": rows,
            "feed_us_per_drain": dist([x / 1e3 for x in feed], "us"),
            "trace_us_per_drain": dist([x / 1e3 for x in trace], "us"),
            "feed_cpu_ms_per_s": per_s(feed), "trace_cpu_ms_per_s": per_s(trace),
            "feed_over_trace": sum(feed) / sum(trace) if sum(trace) else None,
            "decimated": {"every_s": trace_every, "feed_us_per_drain": dist([x / 1e3 for x in decimated], "us"),
                          "feed_cpu_ms_per_s": per_s(decimated),
                          "over_feed": sum(decimated) / sum(feed) if sum(feed) else None,
                          "bytes": traced_info.get("bytes"), "rows": traced_info.get("rows"),
                          "bytes_per_second": (traced_info.get("bytes") or 0) / elapsed, "close_us": closing_us,
                          "cut": traced_info.get("cut")},
            "ring_bytes": rec.memory_bytes, "window_s": rec.window_s,
            "dump": {"bytes": written.get("bytes"), "rows": written.get("rows"), "wall_s": dump_wall,
                     "process_cpu_s": dump_cpu}}


_STEPS = r"""
import sys, time, sysprof
end, last = time.monotonic() + float(sys.argv[1]), time.monotonic()
while time.monotonic() < end:
    with sysprof.mark("step"):
        time.sleep(0.01)
    if time.monotonic() - last >= 20:
        last = time.monotonic()
        sysprof.dump("every 20 s")
"""


def _status(pid):
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return rss, (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _slope(points):
    """MB per minute of a least-squares line through ``(seconds, bytes)``; None for fewer than 3 points."""
    if len(points) < 3:
        return None
    mt, mr = statistics.fmean(t for t, _ in points), statistics.fmean(r for _, r in points)
    return sum((t - mt) * (r - mr) for t, r in points) / sum((t - mt) ** 2 for t, _ in points) * 60 / 1e6


def bench_long(seconds: float, window: float) -> dict:
    folder = tempfile.mkdtemp(prefix="bench-flight-long-")
    script = os.path.join(os.path.dirname(sys.executable), "sysprof")
    cmd = ([script] if os.path.exists(script) else [sys.executable, "-m", "sysprof"]) + [
        "record", "--flight", f"{window:g}s", "--flight-gap", "20s", "--flight-max", "1000", "-i", "1ms", "-o",
        folder, "--", sys.executable, "-c", _STEPS, str(seconds)]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    samples, seen = [], set()
    t0 = time.monotonic()
    try:
        while proc.poll() is None:
            time.sleep(1.0)
            try:
                rss, cpu = _status(proc.pid)
            except (OSError, StopIteration):
                break
            samples.append((time.monotonic() - t0, rss, cpu))
            for name in os.listdir(folder):  # dumps are not kept: the disk is not the point here
                if name not in seen and time.monotonic() - os.stat(os.path.join(folder, name)).st_mtime > 5:
                    seen.add(name)
                    os.unlink(os.path.join(folder, name))
        err = proc.communicate(timeout=600)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
    for name in os.listdir(folder):
        seen.add(name)
        os.unlink(os.path.join(folder, name))
    os.rmdir(folder)
    filled = [(t, r) for t, r, _ in samples if t >= window + 10]
    late = [(t, r) for t, r in filled if t >= seconds / 2]
    cpu = [(b[2] - a[2]) / (b[0] - a[0]) for a, b in zip(samples, samples[1:]) if b[0] > a[0]]
    return {"seconds": seconds, "window_s": window, "returncode": proc.returncode, "dumps": len(seen),
            "dump_lines": sum(1 for line in err.splitlines() if line.startswith("sysprof: flight dump ")),
            "rss_mb_at_window_plus_10s": filled[0][1] / 1e6 if filled else None,
            "rss_mb_end": samples[-1][1] / 1e6 if samples else None,
            "rss_mb_max": max(r for _, r, _ in samples) / 1e6 if samples else None,
            "rss_mb_after_fill": dist([r / 1e6 for _, r in filled], "MB") if filled else None,
            "rss_slope_mb_per_min_after_fill": _slope(filled), "rss_slope_mb_per_min_second_half": _slope(late),
            "rss_mb_by_minute": [round(r / 1e6, 1) for t, r, _ in samples if int(t) % 60 == 0 or t == samples[-1][0]],
            "recorder_cpu_percent": dist([100 * c for c in cpu], "%") if cpu else None,
            "summary": [line for line in err.splitlines() if line.startswith("sysprof: flight recorder:")]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--long", type=float, default=120.0, help="seconds of the long recording (default 120)")
    ap.add_argument("--feed", type=float, default=40.0, help="seconds of the in-process feed run (default 40)")
    ap.add_argument("--window", type=float, default=30.0, help="the flight window (default 30 s)")
    ap.add_argument("--only", nargs="+", choices=("memory", "feed", "long"), default=("memory", "feed", "long"))
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args(argv)
    import sysprof

    doc = {"python": sys.version.split()[0], "cpus": os.cpu_count(), "loadavg_start": os.getloadavg(),
           "sysprof": sysprof.__version__}
    if "memory" in args.only:
        _print_memory(doc, args)
    if "feed" in args.only:
        _print_feed(doc, args)
    if "long" in args.only:
        _print_long(doc, args)
    print(f"load average {doc['loadavg_start'][0]:.2f} -> {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(doc, fh, indent=1)
    return 0


def _print_memory(doc, args):
    doc["memory"] = bench_memory(args.window)
    print("1. memory per second of window (8 + 8 x channels bytes a sample)")
    for label, m in doc["memory"].items():
        made = m[f"made_{args.window:g}s_at_1ms"]
        print(f"  {label:8s} {m['channels']:4d} channels: {m['bytes_per_second_1ms'] / 1e6:.3g} MB/s at 1 ms, "
              f"{m['bytes_per_second_10ms'] / 1e3:.3g} kB/s at 10 ms; a {args.window:g} s window at 1 ms: ring "
              f"{made.get('ring_bytes', 0) / 1e6:.3g} MB, RSS +{made.get('rss_bytes', 0) / 1e6:.3g} MB")


def _print_feed(doc, args):
    doc["feed"] = f = bench_feed(args.feed, args.window)
    print(f"2. drain at 1 ms ({f['channels']} channels, {f['drains']} drains of 0.2 s, {f['rows']} rows)")
    print(f"  flight feed: {fmt(f['feed_cpu_ms_per_s'])} ms CPU per s recorded (per drain median "
          f"{fmt(f['feed_us_per_drain']['median'])} us, p99 {fmt(f['feed_us_per_drain']['p99'])} us)")
    print(f"  full trace (events + JSON) of the same batches: {fmt(f['trace_cpu_ms_per_s'])} ms CPU per s; "
          f"feed / trace {fmt(f['feed_over_trace'])}")
    dec = f["decimated"]
    print(f"  feed with the decimated trace (one row per {dec['every_s'] * 1e3:g} ms): "
          f"{fmt(dec['feed_cpu_ms_per_s'])} ms CPU per s (per drain median {fmt(dec['feed_us_per_drain']['median'])} "
          f"us); / feed without {fmt(dec['over_feed'])}; {dec['rows']} rows, {fmt(dec['bytes_per_second'])} B per "
          f"second of run (gzipped)")
    d = f["dump"]
    print(f"  one dump of the {f['window_s']:g} s window: {d['rows']} rows, {(d['bytes'] or 0) / 1e6:.3g} MB, "
          f"{fmt(d['wall_s'])} s wall, {fmt(d['process_cpu_s'])} s process CPU")


def _print_long(doc, args):
    doc["long"] = g = bench_long(args.long, args.window)
    cpu = g["recorder_cpu_percent"] or {}
    print(f"3. record --flight {args.window:g}s -i 1ms for {args.long:g} s: {g['dumps']} dumps "
          f"({g['dump_lines']} lines), RSS {fmt(g['rss_mb_at_window_plus_10s'])} MB at window + 10 s, "
          f"{fmt(g['rss_mb_end'])} MB at the end, max {fmt(g['rss_mb_max'])} MB; slope after the fill "
          f"{fmt(g['rss_slope_mb_per_min_after_fill'])} MB/min, over the second half "
          f"{fmt(g['rss_slope_mb_per_min_second_half'])} MB/min; by minute {g['rss_mb_by_minute']} MB")
    print(f"  the recorder's CPU: median {fmt(cpu.get('median'))} % of a core (p99 {fmt(cpu.get('p99'))}, "
          f"mean {fmt(cpu.get('mean'))}; sampler thread, drain and dumps together)")


if __name__ == "__main__":
    sys.exit(main())
