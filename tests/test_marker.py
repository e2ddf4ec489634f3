"""Marker state machine, recording decisions and handler calls (sysprof.Profiler + Marker)."""

import warnings

import pytest

import sysprof.profiler.marker as marker_mod
from sysprof.profiler import Profiler, State
from sysprof.profiler.schedule import ProfilerAction


def _bound(handlers, action="active"):
    """A profiler bound to a fresh standalone state whose schedule returns ``box[0]``."""
    box = [action]
    prof = Profiler(schedule=lambda state: box[0], trace_handlers=handlers, sys_prof_cpu=False)
    state = State()
    state.profiler = prof
    prof.bind_to_state(state)
    return prof, state, box


@pytest.fixture
def fake_clock(monkeypatch):
    t = iter(range(1_000_000_000, 2_000_000_000, 1_000))
    monkeypatch.setattr(marker_mod, "_time_ns", lambda: next(t))


def test_marker_before_bind_raises():
    prof = Profiler(schedule=lambda s: "active", trace_handlers=[], sys_prof_cpu=False)
    with pytest.raises(RuntimeError, match=r"Profiler.bind_to_state\(\) must be invoked"):
        prof.marker("x")


def test_duration_instant_counter_calls(recording_handler, fake_clock):
    prof, state, _ = _bound([recording_handler])
    m = prof.marker("step", categories=["train"], record_instant_on_start=True, record_instant_on_finish=True)
    with m:
        pass
    m.instant()
    values = {"loss": 0.5}
    m.counter(values)
    ts = state.timestamp
    common = {"name": "step", "categories": ["train"], "timestamp": ts}
    assert recording_handler.calls == [
        ("duration", {**common, "is_start": True, "wall_clock_time_ns": 1_000_000_000}),
        ("instant", {**common, "wall_clock_time_ns": 1_000_000_000}),
        ("duration", {**common, "is_start": False, "wall_clock_time_ns": 1_000_001_000}),
        ("instant", {**common, "wall_clock_time_ns": 1_000_001_000}),
        ("instant", {**common, "wall_clock_time_ns": 1_000_002_000}),
        ("counter", {**common, "wall_clock_time_ns": 1_000_003_000, "values": {"loss": 0.5}}),
    ]


def test_double_start_and_finish_without_start():
    prof, _, _ = _bound([])
    m = prof.marker("x")
    with pytest.raises(RuntimeError, match="Attempted to finish profiler event x; however, this profiler event is "
                                           "not yet started"):
        m.finish()
    m.start()
    with pytest.raises(RuntimeError, match="Attempted to start profiler event x; however, this marker is already "
                                           "started"):
        m.start()
    m.finish()
    m.start()  # usable again
    m.finish()


@pytest.mark.parametrize("action,recorded", [("skip", False), ("warmup", True), ("active", True),
                                             ("active_and_save", True)])
def test_default_actions(recording_handler, action, recorded):
    prof, _, _ = _bound([recording_handler], action)
    m = prof.marker("x")
    with m:
        pass
    m.counter({"a": 1})
    m.instant()
    assert len(recording_handler.calls) == (4 if recorded else 0)


def test_custom_actions_accept_strings_and_enums(recording_handler):
    prof, _, box = _bound([recording_handler], "warmup")
    m = prof.marker("only_active", actions=[ProfilerAction.ACTIVE, "active_and_save"])
    m.counter({"a": 1})
    assert recording_handler.calls == []
    box[0] = ProfilerAction.ACTIVE
    prof.run_event("batch_start", prof.state, None)  # an event invalidates the cached action
    m.counter({"a": 2})
    assert [c[1]["values"] for c in recording_handler.calls] == [{"a": 2}]


def test_finish_recorded_iff_start_was(recording_handler):
    """A duration started while recording ends in the trace even if the action changed (and vice versa)."""
    prof, state, box = _bound([recording_handler], "active")
    m = prof.marker("x")
    m.start()
    box[0] = "skip"
    state.timestamp = state.timestamp.to_next_batch()  # new timestamp object: action re-evaluated
    m.finish()
    assert [c[1]["is_start"] for c in recording_handler.calls] == [True, False]
    m.start()
    box[0] = "active"
    state.timestamp = state.timestamp.to_next_batch()
    m.finish()
    assert len(recording_handler.calls) == 2


def test_action_cached_per_timestamp():
    calls = []

    def schedule(state):
        calls.append(int(state.timestamp.batch))
        return "active"

    prof = Profiler(schedule=schedule, trace_handlers=[], sys_prof_cpu=False)
    state = State()
    state.profiler = prof
    prof.bind_to_state(state)
    m = prof.marker("x")
    for _ in range(5):
        m.counter({"a": 1})
    state.timestamp = state.timestamp.to_next_batch()
    m.counter({"a": 1})
    assert calls == [0, 1]


def test_decorator_forms_keep_return_value(recording_handler):
    prof, _, _ = _bound([recording_handler])
    m = prof.marker("f")

    @m
    def f(x):
        return x + 1

    @m()
    def g(x, y=2):
        return x * y

    assert f(1) == 2
    assert g(3, y=4) == 12
    assert f.__name__ == "f"
    assert [c[1]["is_start"] for c in recording_handler.calls] == [True, False, True, False]


def test_context_manager_finishes_on_exception(recording_handler):
    prof, _, _ = _bound([recording_handler])
    m = prof.marker("x")
    with pytest.raises(KeyError):
        with m:
            raise KeyError("boom")
    assert [c[1]["is_start"] for c in recording_handler.calls] == [True, False]
    with m:  # not left started
        pass


def test_same_marker_returned_and_categories_updated():
    prof, _, _ = _bound([])
    a = prof.marker("x", categories=("a",))
    b = prof.marker("x", categories=("b",))
    assert a is b and a.categories == ("b",)


def test_trace_handlers_setter_reaches_existing_markers(recording_handler):
    prof, _, _ = _bound([])
    m = prof.marker("x")
    prof.trace_handlers = recording_handler
    m.counter({"a": 1})
    assert len(recording_handler.calls) == 1
    assert prof.trace_handlers == [recording_handler]


def test_raising_handler_reported_once_and_others_still_called(recording_handler):
    class Broken(type(recording_handler)):
        def process_counter_event(self, **kw):
            raise OSError("disk full")

        def process_duration_event(self, **kw):
            raise OSError("disk full")

    broken = Broken()
    prof, _, _ = _bound([broken, recording_handler])
    m = prof.marker("x")
    with pytest.warns(RuntimeWarning, match="Broken raised OSError: disk full"):
        m.counter({"a": 1})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # reported once only
        m.counter({"a": 2})
        with m:
            pass
    assert [c[0] for c in recording_handler.calls] == ["counter", "counter", "duration", "duration"]


def test_raising_handler_with_warnings_as_errors_never_raises_into_training(recording_handler):
    """Warnings made errors (-W error): the first report's RuntimeWarning must not raise out of the marker."""
    class Broken(type(recording_handler)):
        def process_duration_event(self, **kw):
            raise OSError("disk full")

    prof, _, _ = _bound([Broken(), recording_handler])
    m = prof.marker("x")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with m:
            pass
    assert [c[0] for c in recording_handler.calls] == ["duration", "duration"]


def test_profiler_rejects_unknown_kwargs_and_warns_on_torch_tracing(monkeypatch):
    import sysprof.profiler.profiler as profiler_mod

    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        Profiler(schedule=lambda s: "active", trace_handlers=[], bogus=1)
    Profiler(schedule=lambda s: "active", trace_handlers=[], sys_prof_cpu=False, torch_prof_folder="x",
             torch_prof_with_flops=False, torch_prof_profile_memory=False)  # no tracing asked: no warning
    monkeypatch.setattr(profiler_mod, "_warned_torch", False)
    with pytest.warns(RuntimeWarning, match="does not run the torch profiler"):
        Profiler(schedule=lambda s: "active", trace_handlers=[], sys_prof_cpu=False, torch_prof_record_shapes=True)


def test_record_chrome_json_trace_file(recording_handler, tmp_path):
    prof, _, _ = _bound([recording_handler])
    prof.record_chrome_json_trace_file(str(tmp_path / "t.json"))
    assert recording_handler.calls == [("file", {"filepath": tmp_path / "t.json"})]


def test_bind_to_state_callback_order(recording_handler):
    prof = Profiler(schedule=lambda s: "active", trace_handlers=[recording_handler], sys_prof_cpu=True)
    state = State()
    prof.bind_to_state(state)
    assert state.callbacks == [prof, prof.system_profiler, recording_handler]
    assert prof.system_profiler.profile_cpu and not prof.system_profiler.profile_memory
