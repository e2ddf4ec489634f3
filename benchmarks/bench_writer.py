"""Benchmark section 7: drained rows -> trace events (the track model, sysprof.trace.tracks) -> file."""
from __future__ import annotations

import gc
import os
import shutil
import tempfile
import time
from typing import Any, Dict

import numpy as np

from bench_util import dist, fmt, fd, table


# ------------------------------------------------------------------------------------------------
# section 7: writer throughput
# ------------------------------------------------------------------------------------------------

class _Batch:
    def __init__(self, ts, values, channels):
        self.timestamps_ns, self.values, self.channels = ts, values, tuple(channels)

    def __len__(self):
        return int(self.timestamps_ns.shape[0])


_STEP = 1000  # rows per converted batch (a drain's worth at 1 kHz)


def converters(channels):
    """[(label, file suffix, write(writer, ts, values) -> events written)]: the track model's renderers
    (:mod:`sysprof.trace.tracks`) over ``channels``: ``sysprof record``'s dict events (changes-only and every
    row) and the Composer layout's row text (``JSONTraceHandler``'s fast path)."""
    from sysprof.trace.tracks import EventRenderer, RowTemplate, TrackLayout

    out = []
    for changes_only in (True, False):
        def write(w, ts, values, _c=changes_only):
            r = EventRenderer(TrackLayout(channels, "sysprof"), changes_only=_c)
            n = 0
            for i in range(0, ts.size, _STEP):
                events = r.events(_Batch(ts[i:i + _STEP], values[i:i + _STEP], channels))
                w.write_many(events)
                n += len(events)
            events = r.finish()
            w.write_many(events)
            return n + len(events)
        out.append((f"tracks.EventRenderer(sysprof, changes_only={changes_only})", ".json", write))

    def write_composer(w, ts, values):
        layout = TrackLayout(channels, "composer", rates=True)
        template = RowTemplate(layout.series, 0, os.getpid())
        n = 0
        for i in range(0, ts.size, _STEP):
            rows = layout.counter_rows(ts[i:i + _STEP], values[i:i + _STEP], [None] * min(_STEP, ts.size - i))
            for text, count in template.render(rows.times_ns, rows.values):
                w.write_encoded(text, count)
                n += count
        return n
    out.append(("tracks.RowTemplate(composer)", ".json", write_composer))
    return out


def open_writer(path):
    from sysprof.trace.chrome import ChromeTraceWriter

    return ChromeTraceWriter(path, overwrite=True)


def bench_writer(cfg, sysprof, ctx) -> Dict[str, Any]:
    trials = cfg["writer"]
    tb = ctx.get("timing_batch")
    if tb is None or tb[0].size == 0:
        return {"available": False, "reason": "no drained batch (section 3 did not run)"}
    ts, values, channels = tb
    tmp = tempfile.mkdtemp(prefix="sysprof-writer-")
    res: Dict[str, Any] = {"samples": int(ts.size), "channels": len(channels), "trials": trials,
                           "method": "rows drained at 1 kHz (host set, section 3) converted in batches of 1000 "
                                     "rows and written through sysprof.trace.chrome.ChromeTraceWriter; each trial "
                                     "times conversion + writing + close", "modes": {}}
    try:
        res["available"] = True
        for label, suffix, write in converters(channels):
            sps, bps, eps = [], [], []
            for t in range(trials):
                p = os.path.join(tmp, f"w{t}{suffix}")
                gc.collect()
                t0 = time.perf_counter()
                w = open_writer(p)
                nev = write(w, ts, values)
                w.close()
                dt = time.perf_counter() - t0
                size = os.path.getsize(p)
                sps.append(ts.size / dt)
                bps.append(size / dt)
                eps.append(nev / dt)
                os.unlink(p)
            share = 100.0 * 1000.0 / float(np.median(sps))
            res["modes"][label] = {"samples_per_s": dist(sps, "samples/s"), "bytes_per_s": dist(bps, "B/s"),
                                   "events_per_s": dist(eps, "events/s"),
                                   "cpu_percent_of_one_core_at_1kHz": share}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return res


def print_writer(res) -> str:
    if not res.get("available"):
        return f"## 7. Writer throughput\n\nnot available: {res.get('reason')}\n"
    rows = [[k, fd(v["samples_per_s"]), fmt(v["bytes_per_s"]["median"] / 1e6), fmt(v["events_per_s"]["median"]),
             f"{v['cpu_percent_of_one_core_at_1kHz']:.1f} %"] for k, v in res["modes"].items()]
    return (f"## 7. Writer throughput ({res['samples']:,} samples × {res['channels']} channels, "
            f"{res['trials']} trials)\n\n"
            + table(["conversion", "samples/s", "MB/s", "events/s", "one core's share at 1 kHz"], rows) + "\n")
