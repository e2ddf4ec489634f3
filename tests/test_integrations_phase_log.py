"""The trainer callbacks' phase log (sysprof/integrations/phase_log.py) and the summary window's ready snapshots
(SummaryWindow.add(..., snapshot_ns=...) / take_ready): exact spans and values from scripted events."""
import threading

import numpy as np

from sysprof.integrations.phase_log import MAX_PENDING, PhaseLog
from sysprof.integrations.summaries import READY_LAG_SHARE, SummaryWindow

MS = 1_000_000


def test_pairing_rules():
    log = PhaseLog()
    tid = threading.get_native_id()
    log.begin("train_batch", 100)
    log.begin("backward", 110)
    log.end("backward", 130)
    log.end("never_opened", 131)
    log.begin("dataloader", 140, tentative=True)
    log.cancel("dataloader")
    log.end("dataloader", 150)  # cancelled: no span
    log.begin("optimizer_step", 150)
    log.begin("optimizer_step", 155)  # replaces the open one: its start moves
    log.end("optimizer_step", 160, lr=0.1)
    log.span("save", 170, 190, step=3)
    assert log.collect() == [("backward", 110, 130, tid, {}), ("optimizer_step", 155, 160, tid, {"lr": 0.1}),
                             ("save", 170, 190, tid, {"step": 3})]
    assert log.is_open("train_batch") and not log.is_open("backward")
    log.end("train_batch", 200, batch=7)  # opened in the previous collection
    log.begin("dataloader", 200, tentative=True)
    log.restart("dataloader", 230)  # the log step's own time is no fetch
    log.restart("evaluate", 231)  # not open: nothing
    log.end("dataloader", 240)
    assert log.collect() == [("train_batch", 100, 200, tid, {"batch": 7}), ("dataloader", 230, 240, tid, {})]
    assert log.collect() == []


def test_close_ends_open_phases_but_tentative_ones():
    log = PhaseLog()
    tid = log.tid
    log.begin("validation", 10)
    log.begin("train_batch", 5)
    log.begin("dataloader", 20, tentative=True)
    log.begin("backward", 30)
    log.end("backward", 40)
    assert log.close(100, "KeyboardInterrupt") == [
        ("backward", 30, 40, tid, {}), ("train_batch", 5, 100, tid, {"closed": "KeyboardInterrupt"}),
        ("validation", 10, 100, tid, {"closed": "KeyboardInterrupt"})]
    log.begin("x", 200)  # after the close: ignored
    log.end("x", 300)
    log.span("y", 1, 2)
    assert log.collect() == [] and log.close(400, "again") == []


def test_pending_events_are_bounded():
    log = PhaseLog()
    for i in range(MAX_PENDING + 10):
        log.span("s", i, i + 1)
    got = log.collect()
    assert len(got) == MAX_PENDING and got[0][1] == 10  # the oldest went first


class _Batch:
    def __init__(self, values):
        self.values = np.asarray(values, dtype=float)

    def __len__(self):
        return len(self.values)


def _window(t0):
    w = SummaryWindow(["a:mean", "a:max", "c:delta", "phase/dataloader:share"])
    w.bind(["a", "b", "c"])
    w._window_start_ns = t0
    return w


def test_ready_snapshot_ends_the_window_at_its_drain():
    t0 = 1_000 * MS
    w = _window(t0)
    assert w.take_ready(t0 + 100 * MS) is None  # no snapshot yet
    w.add_span("dataloader", t0 + 100 * MS, t0 + 300 * MS)
    w.add_span("dataloader", t0 + 1900 * MS, t0 + 2100 * MS)  # across the snapshot: 100 ms now, 100 ms next
    w.add(_Batch([[50, 0, 1]]), snapshot_ns=t0 + 1000 * MS)  # replaced by the next snapshot
    w.add(_Batch([[100, 0, 5]]))  # rows after a snapshot (a log step's own drain): it is stale now
    assert w.take_ready(t0 + 1010 * MS) is None
    w.add(_Batch([[1, 0, 10], [3, 0, 12]]), snapshot_ns=t0 + 2000 * MS)
    # the log comes 150 ms after the snapshot: 7.5 % of the 2.15 s window, under READY_LAG_SHARE
    assert 150 / 2150 <= READY_LAG_SHARE
    got = w.take_ready(t0 + 2150 * MS)
    assert got == {"sysprof/a_mean": 154 / 4, "sysprof/a_max": 100.0, "sysprof/c_delta": 11.0,  # 12 - 1
                   "sysprof/phase_dataloader_share": 0.15}  # (200 + 100) ms of 2000 ms
    assert w.take_ready(t0 + 2200 * MS) is None  # taken
    # the next window starts at the snapshot; the fold after it was reset away with the first window's rows
    w.add(_Batch([[5, 0, 20], [7, 0, 21]]), snapshot_ns=t0 + 3000 * MS)
    got = w.take(t0 + 3000 * MS)
    assert got == {"sysprof/a_mean": 6.0, "sysprof/a_max": 7.0, "sysprof/c_delta": 9.0,  # 21 - 12
                   "sysprof/phase_dataloader_share": 0.1}  # the other 100 ms of the span across, of 1000 ms


def test_a_stale_snapshot_is_not_taken():
    t0 = 1_000 * MS
    w = _window(t0)
    w.add(_Batch([[1, 0, 10]]), snapshot_ns=t0 + 100 * MS)
    assert w.take_ready(t0 + 300 * MS) is None  # 200 ms of a 300 ms window: the log folds up to itself
    w.add(_Batch([[3, 0, 11]]))
    assert w.take(t0 + 300 * MS) == {"sysprof/a_mean": 2.0, "sysprof/a_max": 3.0, "sysprof/c_delta": 1.0,
                                     "sysprof/phase_dataloader_share": 0.0}
