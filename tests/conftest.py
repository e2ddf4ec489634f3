"""Shared test helpers for the profiler-layer tests (tests/test_marker.py, test_json_trace.py, ...)."""

from __future__ import annotations

import os
import sys

import pytest

import sysprof
from sysprof.profiler.trace_handler import TraceHandler


# The CPU budget stretches a source's interval when sysprof's threads use more than 5 % of a core, which depends on the
# machine's load: tests that count reads or compare a row with an independent reader would then depend on it. So the
# suite runs without a budget unless a test asks for one (tests/test_budget.py); subprocesses inherit this.
os.environ["SYSPROF_BUDGET"] = "none"


def pytest_sessionstart(session):
    # The suite must test the installed package with its extension. Importing the source tree
    # (e.g. `python -m pytest` from the checkout puts it first on sys.path) would silently fall
    # back to psutil and test the wrong backend.
    ok, why = sysprof.native_available()
    if sys.platform.startswith("linux") and not ok and not os.environ.get("SYSPROF_TEST_PSUTIL_ONLY"):
        pytest.exit(f"sysprof imported from {os.path.dirname(sysprof.__file__)} without its native extension "
                    f"({why}). Run the installed package: .venv/bin/pytest (see README).", returncode=3)


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
def cycle_trace_handler():
    """A factory: sysprof's cycle-file trace handler for ``suffix`` (``".json"``, or ``".pftrace"``: skipped without
    perfetto) writing into ``folder``, no uploads, no merged trace."""
    def make(suffix: str, folder) -> TraceHandler:
        if suffix == ".pftrace":
            pytest.importorskip("perfetto")
            from sysprof.profiler import PerfettoTraceHandler

            return PerfettoTraceHandler(folder=str(folder), remote_file_name=None)
        return sysprof.JSONTraceHandler(folder=str(folder), remote_file_name=None, merged_trace_filename=None)
    return make


@pytest.fixture
def recording_handler() -> RecordingHandler:
    return RecordingHandler()
