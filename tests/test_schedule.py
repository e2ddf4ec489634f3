"""ProfilerAction and cyclic_schedule: Composer 0.32.1 semantics."""

from types import SimpleNamespace

import pytest

from sysprof.profiler.schedule import ProfilerAction, action_value, cyclic_schedule

S, W, A, AS = "skip", "warmup", "active", "active_and_save"


def _state(batch_in_epoch, dataloader_len=None, resumption=0, profiler=True):
    return SimpleNamespace(timestamp=SimpleNamespace(batch_in_epoch=batch_in_epoch), dataloader_len=dataloader_len,
                           profiler=SimpleNamespace(resumption_batch_idx=resumption) if profiler else None)


def _run(schedule, n, **kw):
    return [schedule(_state(b, **kw)).value for b in range(n)]


def test_defaults():
    assert _run(cyclic_schedule(), 8) == [W, A, A, A, AS, S, S, S]


def test_skip_wait_warmup_active_repeat():
    sched = cyclic_schedule(skip_first=1, wait=1, warmup=1, active=2, repeat=2)
    assert _run(sched, 12) == [S, S, W, A, AS, S, W, A, AS, S, S, S]


def test_repeat_zero_cycles_whole_epoch():
    sched = cyclic_schedule(wait=1, warmup=0, active=2, repeat=0)
    assert _run(sched, 9) == [S, A, AS, S, A, AS, S, A, AS]


def test_last_batch_of_epoch_saves():
    sched = cyclic_schedule(warmup=1, active=4)
    assert _run(sched, 3, dataloader_len=3) == [W, A, AS]
    # warmup at the last batch does not save
    assert _run(cyclic_schedule(wait=1, warmup=1, active=2), 2, dataloader_len=2) == [S, W]


def test_resumption_batch_idx_shifts_skip_first():
    sched = cyclic_schedule(skip_first=1, warmup=1, active=1)
    assert _run(sched, 5, resumption=2) == [S, S, S, W, AS]
    assert _run(sched, 5, profiler=False) == [S, W, AS, S, S]


@pytest.mark.parametrize("kw", [dict(skip_first=-1), dict(wait=-1), dict(active=-2), dict(repeat=-1),
                                dict(wait=0, warmup=0, active=0)])
def test_bad_arguments(kw):
    with pytest.raises(ValueError):
        cyclic_schedule(**kw)


def test_action_equality_and_hash():
    assert ProfilerAction.ACTIVE == "active"
    assert ProfilerAction.ACTIVE == "ACTIVE"
    assert ProfilerAction.ACTIVE != ProfilerAction.WARMUP
    assert ProfilerAction.ACTIVE != "nonsense"
    assert ProfilerAction("Active_And_Save") is ProfilerAction.ACTIVE_AND_SAVE
    assert ProfilerAction(SimpleNamespace(value="skip")) is ProfilerAction.SKIP
    assert hash(ProfilerAction.WARMUP) == hash("warmup")
    assert ProfilerAction.ACTIVE in (ProfilerAction.WARMUP, ProfilerAction.ACTIVE)
    with pytest.raises(ValueError):
        ProfilerAction("bogus")


def test_action_value():
    assert action_value(ProfilerAction.WARMUP) == "warmup"
    assert action_value("SKIP") == "skip"
    with pytest.raises(ValueError, match="not a profiler action"):
        action_value(3)
