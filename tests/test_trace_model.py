"""TraceData's duration and instant events: X events, B/E pairs matched per (pid, tid) as a stack, unclosed
spans ending at the trace's end, sysprof's own start/stop not counted as instants."""
from sysprof.report import Span, TraceData


def test_spans_from_x_and_nested_b_e_pairs():
    events = [
        {"name": "sysprof start", "ph": "i", "ts": 0, "pid": 1, "tid": 0, "args": {}},
        {"name": "event/batch", "ph": "B", "ts": 100, "pid": 1, "tid": 7},
        {"name": "dataloader", "ph": "B", "ts": 110, "pid": 1, "tid": 7},
        {"ph": "E", "ts": 150, "pid": 1, "tid": 7},                      # closes dataloader (no name, a stack)
        {"name": "other-thread", "ph": "B", "ts": 120, "pid": 1, "tid": 8},
        {"name": "event/batch", "ph": "E", "ts": 300, "pid": 1, "tid": 7, "args": {"step": 3}},
        {"name": "ckpt", "ph": "X", "ts": 400, "dur": 25.5, "pid": 2, "tid": 2, "args": {"k": 1}},
        {"name": "ckpt", "ph": "X", "ts": 500, "dur": -1, "pid": 2, "tid": 2},   # bad duration: skipped
        {"name": "xid", "ph": "i", "ts": 450, "pid": 1, "tid": 0, "args": {"code": 79}},
        {"ph": "E", "ts": 460, "pid": 9, "tid": 9},                      # an E with no B: ignored
        {"name": "sysprof stop", "ph": "i", "ts": 1000, "pid": 1, "tid": 0, "args": {}},
    ]
    d = TraceData(events)
    assert d.spans == [
        Span("event/batch", 100, 300, 1, 7, {"step": 3}),
        Span("dataloader", 110, 150, 1, 7, {}),
        Span("other-thread", 120, 1000, 1, 8, {}),                       # never closed: ends at the stop event
        Span("ckpt", 400, 425.5, 2, 2, {"k": 1}),
    ]
    assert d.spans[3].duration_us == 25.5 and d.spans[0].name == "event/batch"
    assert [(i.name, i.ts_us, i.args) for i in d.instants] == [("xid", 450.0, {"code": 79})]
