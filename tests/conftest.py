"""Shared test helpers for the profiler-layer tests (tests/test_marker.py, test_json_trace.py, ...)."""

from __future__ import annotations

import pytest

from sysprof.trace_handler import TraceHandler


class RecordingHandler(TraceHandler):
    """Trace handler that keeps every call as ``(kind, kwargs)`` in :attr:`calls`."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list = []

    def process_duration_event(self, **kw):
        self.calls.append(("duration", kw))

    def process_instant_event(self, **kw):
        self.calls.append(("instant", kw))

    def process_counter_event(self, **kw):
        self.calls.append(("counter", kw))

    def process_chrome_json_trace_file(self, filepath):
        self.calls.append(("file", {"filepath": filepath}))


@pytest.fixture
def recording_handler() -> RecordingHandler:
    return RecordingHandler()
