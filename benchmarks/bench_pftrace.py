"""Perfetto-native traces: the .pftrace / Chrome JSON size ratio of the same recording, bytes per sample, and the
write and read cost per event of PerfettoTraceWriter / read_events against ChromeTraceWriter / read_trace.

Method: `sysprof record --interval 1ms --duration D -o x.json` (the host set, then --all), `trials` times each; the
events of each recording are written again with PerfettoTraceWriter (the same events, so the ratio compares the
formats only; flushed once per second of their timestamps, as `record` flushes, so each second is a chunk of its
own) and with ChromeTraceWriter (the cost reference); each write and read is timed `repeats` times. The cost of the
per-second chunks (each one self-contained, so that damage costs only its own): size and write time against the
same events written as one chunk, in the same run.
Bytes per sample = file size / the samples the recording wrote (its stop event).

Run alone: python benchmarks/bench_pftrace.py [--duration 3] [--trials 3] [--repeats 5]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, Optional, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import dist, fd, fmt, table  # noqa: E402

SETS = (("host", []), ("--all", ["--all"]))


def _sysprof_cli():
    script = os.path.join(os.path.dirname(sys.executable), "sysprof")
    return [script] if os.path.exists(script) else [sys.executable, "-m", "sysprof"]


def _timed(fn, repeats: int):
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def write_flushed(writer, events, period_us: float = 1e6) -> None:
    """Write ``events``, flushing once per ``period_us`` of their timestamps (``sysprof record`` flushes every
    second: each flush is a chunk of the .pftrace)."""
    last = None
    for e in events:
        writer.write(e)
        ts = e.get("ts")
        if isinstance(ts, (int, float)):
            last = ts if last is None else last
            if ts - last >= period_us:
                writer.flush()
                last = ts


def bench_pftrace(cfg, sysprof) -> Dict[str, Any]:
    duration, trials, repeats = cfg.get("pftrace", (3.0, 3, 5))
    try:
        from sysprof.trace.perfetto import protos

        protos()
    except ImportError as e:
        return {"available": False, "reason": str(e)}
    from sysprof.trace.chrome import ChromeTraceWriter, read_trace
    from sysprof.trace.perfetto import read_events
    from sysprof.trace.perfetto_write import PerfettoTraceWriter

    tmp = tempfile.mkdtemp(prefix="sysprof-pftrace-")
    res: Dict[str, Any] = {"available": True, "duration_s": duration, "trials": trials, "repeats": repeats,
                           "interval": "1ms", "sets": {}}
    try:
        for label, flags in SETS:
            ratios, bps_json, bps_pf, w_json, w_pf, r_json, r_pf, evs = [], [], [], [], [], [], [], []
            chunk_size, chunk_time = [], []
            for trial in range(trials):
                js = os.path.join(tmp, f"{trial}.json")
                pf = os.path.join(tmp, f"{trial}.pftrace")
                proc = subprocess.run(_sysprof_cli() + ["record", "-q", "-f", "--interval", "1ms", "--duration",
                                                        f"{duration}s", *flags, "-o", js],
                                      capture_output=True, text=True, timeout=duration + 120)
                if proc.returncode != 0:
                    return {"available": False, "reason": f"record failed: {proc.stderr.strip()[-300:]}"}
                events = read_trace(js)
                stop = next(e for e in events if e.get("name") == "sysprof stop")
                samples = max(1, int(stop["args"]["samples_written"]))

                def write_pf(events=events, pf=pf):
                    with PerfettoTraceWriter(pf, overwrite=True) as w:
                        write_flushed(w, events)

                def write_one_chunk(events=events, pf=pf + ".one"):
                    with PerfettoTraceWriter(pf, overwrite=True) as w:
                        w.write_many(events)

                def write_js(events=events, js=js):
                    with ChromeTraceWriter(js, overwrite=True) as w:
                        w.write_many(events)

                n = len(events)
                pairs = [(_timed(write_pf, 1)[0], _timed(write_one_chunk, 1)[0]) for _ in range(repeats)]  # alternated
                w_pf += [t / n * 1e6 for t, _ in pairs]
                chunk_time += [t / one for t, one in pairs]
                w_json += [t / n * 1e6 for t in _timed(write_js, repeats)]
                chunk_size.append(os.path.getsize(pf) / os.path.getsize(pf + ".one"))
                r_pf += [t / n * 1e6 for t in _timed(lambda: read_events(pf), repeats)]
                r_json += [t / n * 1e6 for t in _timed(lambda: read_trace(js), repeats)]
                size_js, size_pf = os.path.getsize(js), os.path.getsize(pf)
                assert read_events(pf) == read_trace(js), "the .pftrace does not read back as its events"
                ratios.append(size_js / size_pf)
                bps_json.append(size_js / samples)
                bps_pf.append(size_pf / samples)
                evs.append(n)
            res["sets"][label] = {"ratio": dist(ratios, "x"), "json_bytes_per_sample": dist(bps_json, "B"),
                                  "pftrace_bytes_per_sample": dist(bps_pf, "B"), "events": dist(evs, "events"),
                                  "write_us_per_event": {"pftrace": dist(w_pf, "us"), "json": dist(w_json, "us")},
                                  "read_us_per_event": {"pftrace": dist(r_pf, "us"), "json": dist(r_json, "us")},
                                  "chunks_vs_one": {"size": dist(chunk_size, "x"), "write": dist(chunk_time, "x")}}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return res


def print_pftrace(res) -> str:
    if not res.get("available"):
        return f"## .pftrace vs Chrome JSON\n\nnot measured: {res.get('reason')}\n"
    out = (f"## .pftrace vs Chrome JSON (the same events of `sysprof record --interval {res['interval']} "
           f"--duration {res['duration_s']}s`, {res['trials']} recordings per set, {res['repeats']} timed writes "
           f"and reads of each)\n\n")
    rows = []
    for label, s in res["sets"].items():
        rows.append([label, fmt(s["events"]["median"]), fd(s["ratio"]), fmt(s["json_bytes_per_sample"]["median"]),
                     fmt(s["pftrace_bytes_per_sample"]["median"]),
                     fd(s["write_us_per_event"]["json"]), fd(s["write_us_per_event"]["pftrace"]),
                     fd(s["read_us_per_event"]["json"]), fd(s["read_us_per_event"]["pftrace"]),
                     fd(s["chunks_vs_one"]["size"]), fd(s["chunks_vs_one"]["write"])])
    out += table(["set", "events", "JSON / .pftrace size (x)", "JSON B/sample", ".pftrace B/sample",
                  "JSON write µs/event", ".pftrace write µs/event", "JSON read µs/event", ".pftrace read µs/event",
                  "per-second chunks / one chunk: size (x)", "write time (x)"],
                 rows)
    return out + "\n\ngoal: .pftrace >= 5x smaller than the JSON of the same recording\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=3.0, help="seconds per recording (default 3)")
    ap.add_argument("--trials", type=int, default=3, help="recordings per set (default 3)")
    ap.add_argument("--repeats", type=int, default=5, help="timed writes/reads of each recording (default 5)")
    args = ap.parse_args(argv)
    import sysprof

    print(print_pftrace(bench_pftrace({"pftrace": (args.duration, args.trials, args.repeats)}, sysprof)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
