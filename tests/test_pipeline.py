"""The one pipeline (sysprof.pipeline): the drain loop's rules on a scripted sampler, with exact values.

- every chunk reaches every sink, events merged in time order (metadata first);
- a sink or producer that raises is taken out, the others go on, a failed sink is still closed at the stop;
- the stop pumps a final chunk, closes every sink once with the stop arguments, and is idempotent;
- a forked child's copy of a session never drains or writes;
- the typed events' Chrome form (trace.events.to_chrome) and the start metadata's keys (built once).
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from sysprof.pipeline import Session, Sink
from sysprof.pipeline.session import Producer
from sysprof.sampling.sampler import Batch
from sysprof.trace import events as ev

from cli_support import in_forked_child

CHANNELS = ("cpu/percent", "memory/used_bytes")


class ScriptedSampler:
    """Hands out the next of ``batches`` (lists of (t_ns, [values])) at each drain; counts starts and stops."""

    def __init__(self, batches):
        self.channels = CHANNELS
        self.batches = list(batches)
        self.interval = 0.01
        self.started = self.stopped = 0
        self.stats = {"taken": 0, "dropped": 0, "missed_deadlines": 0}
        self.errors = {}
        self.intervals = {"cpu": 0.01, "memory": 0.01}

    def start(self):
        self.started += 1

    def stop(self):
        self.stopped += 1

    def drain(self):
        rows = self.batches.pop(0) if self.batches else []
        self.stats["taken"] += len(rows)
        return Batch(np.array([t for t, _ in rows], dtype=np.int64),
                     np.array([v for _, v in rows], dtype=np.float64).reshape(len(rows), len(CHANNELS)), CHANNELS)


class Keep(Sink):
    def __init__(self, name="keep", fail_at=None):
        self.name, self.fail_at = name, fail_at
        self.opened, self.chunks, self.closed_with, self.flushes = None, [], [], 0

    def open(self, start):
        self.opened = start

    def take(self, chunk):
        if self.fail_at is not None and len(self.chunks) == self.fail_at:
            raise OSError(28, "No space left on device")
        self.chunks.append(chunk)

    def flush(self):
        self.flushes += 1

    def close(self, stop):
        self.closed_with.append(stop)


class Ticks(Producer):
    """An instant per row at the row's time + 1 ns, and a metadata event in the first drain."""

    name = "ticks"

    def __init__(self, fail=False):
        self.fail, self.first = fail, True

    def take(self, batch, stop_ns):
        if self.fail:
            raise RuntimeError("broken producer")
        out = [ev.instant("tick", int(t) + 1, 7) for t in batch.timestamps_ns.tolist()]
        if self.first:
            self.first = False
            out.insert(0, ev.metadata("process_name", 7, {"name": "seven"}))
        return out

    def stop_args(self):
        return {"ticks": "done"}


class Marks(Producer):
    name = "marks"

    def take(self, batch, stop_ns):
        if stop_ns is not None:
            return [ev.end("step", stop_ns, 7, 1)]
        return [ev.begin("step", 1_000_000_050, 7, 1)] if len(batch) else []

    def stop_args(self):
        return {}


def _session(batches, sinks, producers=()):
    sampler = ScriptedSampler(batches)
    return sampler, Session(sampler, sinks, producers, period=3600, flush_period=3600)


def test_chunks_reach_every_sink_with_events_in_time_order():
    rows = [(1_000_000_000, [10.0, 4096.0]), (1_000_000_100, [20.0, 8192.0])]
    a, b = Keep("a"), Keep("b")
    sampler, s = _session([rows], [a, b], [Ticks(), Marks()])
    s.start(thread=False)
    assert sampler.started == 1 and a.opened.channels == CHANNELS and b.opened is a.opened
    chunk = s.pump()
    assert chunk is a.chunks[0] is b.chunks[0]
    assert chunk.batch.timestamps_ns.tolist() == [1_000_000_000, 1_000_000_100]
    assert chunk.batch.values.tolist() == [[10.0, 4096.0], [20.0, 8192.0]]
    assert [(e.kind, e.name, e.t_ns) for e in chunk.events] == [
        ("metadata", "process_name", 0), ("instant", "tick", 1_000_000_001), ("begin", "step", 1_000_000_050),
        ("instant", "tick", 1_000_000_101)]
    assert not chunk.final and s.rows == 2


def test_a_failing_sink_is_taken_out_and_still_closed():
    rows = [[(1, [1.0, 1.0])], [(2, [2.0, 2.0])], [(3, [3.0, 3.0])]]
    told = []
    bad, good = Keep("disk", fail_at=1), Keep("good")
    sampler = ScriptedSampler(rows)
    s = Session(sampler, [bad, good], [Ticks()], period=3600, flush_period=3600,
                on_failure=lambda what, e: told.append((what, str(e))))
    s.start(thread=False)
    s.pump()
    s.pump()
    s.pump()
    assert len(bad.chunks) == 1 and len(good.chunks) == 3
    assert told == [("disk", "[Errno 28] No space left on device")]
    assert s.failures == {"disk": "OSError: [Errno 28] No space left on device"}
    args = s.stop({"reason": "end"})
    assert len(bad.closed_with) == 1 and len(good.closed_with) == 1  # the failed sink still closes
    assert good.chunks[-1].final and good.chunks[-1].batch.timestamps_ns.tolist() == []
    assert args["reason"] == "end" and args["ticks"] == "done" and args["samples_written"] == 3
    assert args["stats"] == {"taken": 3, "dropped": 0, "missed_deadlines": 0}
    assert args["intervals_s"] == {"cpu": 0.01, "memory": 0.01} and args["errors"] == {}


def test_a_failing_producer_leaves_the_rows_and_the_others():
    sink = Keep()
    sampler, s = _session([[(5, [1.0, 2.0])]], [sink], [Ticks(fail=True), Marks()])
    s.start(thread=False)
    chunk = s.pump()
    assert chunk.batch.timestamps_ns.tolist() == [5]
    assert [(e.kind, e.name) for e in chunk.events] == [("begin", "step")]
    assert s.failures == {"ticks": "RuntimeError: broken producer"}


def test_stop_is_final_once_and_idempotent():
    sink = Keep()
    sampler, s = _session([[(5, [1.0, 2.0])], [(6, [1.0, 2.0])]], [sink], [Marks()])
    s.start(thread=False)
    s.pump()
    first = s.stop()
    assert sampler.stopped == 1 and first is not None and s.closed
    final = sink.chunks[-1]
    assert final.final and final.batch.timestamps_ns.tolist() == [6]  # the rows left in the ring
    assert [(e.kind, e.name) for e in final.events] == [("end", "step")]
    assert s.stop() is None and sampler.stopped == 1 and len(sink.closed_with) == 1
    n = len(sink.chunks)
    assert s.pump() is None and len(sink.chunks) == n  # a closed session feeds nobody


def test_the_drain_thread_pumps_and_stops(tmp_path):
    sink = Keep()
    sampler = ScriptedSampler([[(i, [float(i), 0.0])] for i in range(1, 4)])
    s = Session(sampler, [sink], period=0.001, flush_period=3600)
    s.start()
    for _ in range(600_000):  # three drains by the session's own thread (waits on counts, not on time)
        if not sampler.batches:
            break
        s._stopped.wait(0.001)
    assert not sampler.batches
    s.stop()
    got = [t for c in sink.chunks for t in c.batch.timestamps_ns.tolist()]
    assert got == [1, 2, 3] and sink.chunks[-1].final


def test_a_stop_inside_a_pump_while_the_drain_thread_waits_for_it():
    """A stop from inside a pump on another thread than the drain thread (a signal handler that interrupted the
    training thread's pump, or a sink) while the drain thread waits for the session's lock: joining that thread
    deadlocked. The stop closes every sink once, the outer pump feeds no sink after it, the drain thread ends."""
    import sys
    import threading

    class StopInside(Keep):
        def take(self, chunk):
            super().take(chunk)
            if threading.current_thread() is not owner or chunk.final:
                return
            drain = s._thread
            while True:  # until the drain thread waits for the lock this pump holds (a state, not a time)
                frame = sys._current_frames().get(drain.ident)
                if frame is not None and frame.f_code.co_name == "pump":
                    break
                s._stopped.wait(0.001)
            s.stop({"reason": "signal"})

    first, later = StopInside("first"), Keep("later")
    sampler = ScriptedSampler([[(5, [1.0, 2.0])], [(6, [1.0, 2.0])]])
    s = Session(sampler, [first, later], period=0.001, flush_period=3600)
    owner = threading.Thread(target=s.pump, daemon=True)
    s.start()
    drain = s._thread
    owner.start()
    owner.join(60)  # a bound on a deadlock, not a timing
    assert not owner.is_alive() and s.closed
    drain.join(60)
    assert not drain.is_alive()
    assert [c["reason"] for c in first.closed_with] == ["signal"] and len(later.closed_with) == 1
    assert first.chunks[-1].final and later.chunks[-1].final  # (before it: what the drain thread pumped first)
    assert sum(c.final for c in first.chunks + later.chunks) == 2 and s.failures == {}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_never_drains_or_writes():
    sink = Keep()
    sampler, s = _session([[(5, [1.0, 2.0])]], [sink])
    s.start(thread=False)
    # the child's copy of the session is inert
    assert in_forked_child(lambda: s.pump() is None and s.stop() is None and sampler.stopped == 0
                           and not sink.closed_with)
    assert s.pump().batch.timestamps_ns.tolist() == [5]  # the parent's goes on
    s.stop()


def test_to_chrome_shapes():
    us = lambda t: t // 1000  # noqa: E731
    assert ev.to_chrome(ev.span("fwd", 2_000_000, 5_500_000, 3, 4, {"step": 1}, "sysprof.phase"), us) == {
        "name": "fwd", "cat": "sysprof.phase", "ph": "X", "ts": 2000, "dur": 3500, "pid": 3, "tid": 4,
        "args": {"step": 1}}
    assert ev.to_chrome(ev.span("fwd", 2_000_000, 5_500_000, 3, 4), us) == {
        "name": "fwd", "ph": "X", "ts": 2000, "dur": 3500, "pid": 3, "tid": 4}
    assert ev.to_chrome(ev.instant("gpu xid", 7_000, 3, {"xid": 79}), us) == {
        "name": "gpu xid", "ph": "i", "s": "g", "ts": 7, "pid": 3, "tid": 0, "args": {"xid": 79}}
    assert ev.to_chrome(ev.begin("load", 9_999, 3, 5, cat="sysprof.marker"), us) == {
        "name": "load", "cat": "sysprof.marker", "ph": "B", "ts": 9, "pid": 3, "tid": 5}
    assert ev.to_chrome(ev.metadata("process_name", 3, {"name": "x"}), us) == {
        "name": "process_name", "ph": "M", "pid": 3, "tid": 0, "args": {"name": "x"}}
    assert ev.counter_event("cpu", 1, 3, 0, {"percent": 5}) == {
        "name": "cpu", "ph": "C", "ts": 1, "pid": 3, "tid": 0, "args": {"percent": 5}}


def test_start_metadata_has_every_key_for_every_recorder():
    sampler = ScriptedSampler([])
    ranks = {"rank": 2, "local_rank": 0, "node": "n", "world_size": 4, "local_world_size": 2}
    cli = ev.start_metadata(sampler, CHANNELS, 123, recorder_pid=1, pid=9, command_line="python x.py",
                            duration_limit_s=5.0, ranks=ranks)
    cb = ev.start_metadata(sampler, CHANNELS, 123, recorder_pid=1, pid=1, framework="lightning", ranks=ranks)
    assert set(cli) == set(cb)
    assert cli["duration_limit_s"] == 5.0 and cb["duration_limit_s"] is None
    assert cb["framework"] == "lightning" and cli["framework"] == ""
    assert cli["channels"] == list(CHANNELS) and cli["interval_s"] == 0.01 and cli["rank"] == 2
    head = ev.head(cli, 1, 123_456_789, {"cpu/percent": "%"}, ev.process_name(1, "sysprof: system", 0))
    assert [(e.kind, e.name) for e in head] == [
        ("metadata", "process_name"), ("metadata", "process_sort_index"), ("metadata", "global_rank"),
        ("metadata", "clock_sync_timestamp_us"), ("instant", "sysprof start"), ("metadata", "sysprof units")]
    assert head[3].args == {"value": 123_456} and head[2].args == {"value": 2}
    assert head[5].args == {"units": {"cpu/percent": "%"}}
