"""sysprof.distributed without torch: rank discovery, the per-node source plan, the clock-sync arithmetic over a
fake store, the trace metadata, and the merger's use of measured offsets (sysprof.trace.merge)."""
import json
import threading
import time
from datetime import timedelta

import pytest

from sysprof import distributed
from sysprof.distributed import ClockSync, RankInfo, gpu_keywords, plan_sources, rank_info, trace_metadata
from sysprof.trace.merge import RankClock, clock_shifts, merge_traces, rank_clock


def test_rank_info_torchrun_env():
    env = {"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4"}
    info = rank_info(env)
    assert (info.rank, info.local_rank, info.world_size, info.local_world_size, info.source) == (5, 1, 8, 4, "env")
    assert info.distributed and info.node
    assert set(info.as_dict()) == {"rank", "local_rank", "node", "world_size", "local_world_size"}


def test_rank_info_slurm_and_none():
    info = rank_info({"SLURM_PROCID": "6", "SLURM_LOCALID": "2", "SLURM_NTASKS": "8", "SLURM_TASKS_PER_NODE": "4(x2)"})
    assert (info.rank, info.local_rank, info.world_size, info.local_world_size, info.source) == (6, 2, 8, 4, "slurm")
    # RANK wins over Slurm's
    assert rank_info({"RANK": "1", "WORLD_SIZE": "2", "SLURM_PROCID": "7", "SLURM_NTASKS": "9"}).rank == 1
    none = rank_info({})
    assert (none.rank, none.local_rank, none.world_size, none.local_world_size, none.source) == (0, 0, 1, 1, "none")
    assert not none.distributed
    # no LOCAL_RANK: rank modulo the node's ranks
    assert rank_info({"RANK": "5", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4"}).local_rank == 1


ASKED = {"cpu": True, "memory": True, "disk": False, "net": True, "process": True, "process_tree": False,
         "cgroup": True, "gpu": True, "pressure": True}


def test_plan_sources_one_host_sampler_per_node():
    lr1 = RankInfo(rank=3, local_rank=1, world_size=4, local_world_size=2)
    lr0 = RankInfo(rank=2, local_rank=0, world_size=4, local_world_size=2)
    assert plan_sources(ASKED, lr1) == {"cpu": False, "memory": False, "disk": False, "net": False, "process": True,
                                        "process_tree": False, "cgroup": True, "gpu": True, "pressure": False}
    assert plan_sources(ASKED, lr0) == ASKED
    assert plan_sources(ASKED, lr1, "every_rank") == ASKED
    assert plan_sources(ASKED, RankInfo()) == ASKED  # not distributed
    with pytest.raises(ValueError, match="host_sampling"):
        plan_sources(ASKED, lr1, "per_rank")


def test_gpu_keywords_hook():
    class WithGpus:
        def __init__(self, interval=0.001, gpus=None, **sources):
            pass

    class Without:
        def __init__(self, interval=0.001, **sources):
            pass

    lr1 = RankInfo(rank=3, local_rank=1, world_size=4, local_world_size=2)
    assert gpu_keywords(WithGpus, {"gpu": True}, lr1) == {"gpus": [1]}
    assert gpu_keywords(WithGpus, {"gpu": False}, lr1) == {}
    assert gpu_keywords(WithGpus, {"gpu": True}, lr1, "every_rank") == {}
    assert gpu_keywords(WithGpus, {"gpu": True}, RankInfo()) == {}
    assert gpu_keywords(Without, {"gpu": True}, lr1) == {}


class FakeStore:
    """torch.distributed.Store's set/get/wait over a dict, thread-safe; ``on_set(key)`` runs after each set."""

    def __init__(self, on_set=None):
        self.data, self.cond, self.on_set = {}, threading.Condition(), on_set

    def set(self, key, value):
        with self.cond:
            self.data[key] = value if isinstance(value, bytes) else str(value).encode()
            self.cond.notify_all()
        if self.on_set is not None:
            self.on_set(key)

    def get(self, key):
        with self.cond:
            return self.data[key]

    def wait(self, keys, timeout):
        end = time.monotonic() + timeout.total_seconds()
        with self.cond:
            while not all(k in self.data for k in keys):
                left = end - time.monotonic()
                if left <= 0:
                    raise RuntimeError("timeout")
                self.cond.wait(left)


def test_clock_sync_picks_the_least_round_trip():
    # rank 1's exchanges, (t1 sent, rank 0's answer t0, t2 received) in ns: the second has the least round trip
    triples = [(100_000, 1_150_000, 300_000), (400_000, 1_420_000, 440_000), (500_000, 1_600_000, 700_000)]
    mine = iter(t for t1, _, t2 in triples for t in (t1, t2))
    answers = iter(t0 for _, t0, _ in triples)

    def on_set(key):  # rank 0, answering at once
        if key.startswith("q/"):
            _, k, r, i = key.split("/")
            store.set(f"a/{k}/{r}/{i}", str(next(answers)))

    store = FakeStore(on_set)
    store.set("epoch", "777")
    sync = ClockSync(store, rank=1, world_size=2, samples=3, clock=lambda: next(mine, 900_000))
    est = sync._measure(0)
    assert (est.offset_us, est.uncertainty_us, est.rtt_us, est.epoch_us) == (1000.0, 20.0, 40.0, 777)


def test_clock_sync_two_threads_measures_a_known_offset():
    store = FakeStore()
    skew_ns = 5_000_000  # rank 1's clock runs 5 ms ahead of rank 0's
    got = []
    r0 = ClockSync(store, rank=0, world_size=2, samples=4, timeout_s=30).start()
    r1 = ClockSync(store, rank=1, world_size=2, samples=4, timeout_s=30, on_estimate=got.append,
                   clock=lambda: time.time_ns() + skew_ns).start()
    try:
        est = r1.wait_first(30)
        assert est is not None and got == [est]
        assert abs(est.offset_us - (-skew_ns / 1000)) <= est.uncertainty_us + 1
        assert r0.estimate.offset_us == 0.0 and r0.estimate.uncertainty_us == 0.0
        assert est.epoch_us == r0.estimate.epoch_us
    finally:
        r1.stop()
        r0.stop()


def test_trace_metadata_writes_composer_clock_sync_from_the_estimate(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert trace_metadata(123, 4)["clock_sync_timestamp_us"] == {"value": 123}  # no sync running
    sync = ClockSync(FakeStore(), rank=1, world_size=2)
    sync.estimate = distributed.ClockEstimate(offset_us=-2500.4, uncertainty_us=30.2, epoch_us=10_000, rtt_us=60.4,
                                              at_ns=0)
    monkeypatch.setattr(distributed, "_current", sync)
    meta = trace_metadata(123, 4)
    assert meta["clock_sync_timestamp_us"] == {"value": 12500}
    assert meta["clock_sync_error_bound"] == {"value": 30}
    assert meta["sysprof_rank"]["clock_offset_us"] == -2500.4
    assert (meta["sysprof_rank"]["rank"], meta["sysprof_rank"]["local_rank"], meta["sysprof_rank"]["world_size"]) \
        == (1, 1, 2)


def test_trace_metadata_single_process_stays_composer(monkeypatch):
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS"):
        monkeypatch.delenv(k, raising=False)
    assert list(trace_metadata(5, 1)) == ["clock_sync_timestamp_us", "clock_sync_error_bound"]


def _file(path, rank, sync_us, offset_us=None, counter=None, ts=1_000_000):
    events = [{"name": "global_rank", "ph": "M", "pid": rank, "tid": 1, "args": {"value": rank}},
              {"name": "clock_sync_timestamp_us", "ph": "M", "pid": rank, "tid": 1, "args": {"value": sync_us}}]
    if offset_us is not None:
        events.append({"name": "sysprof_rank", "ph": "M", "pid": rank, "tid": 1,
                       "args": {"rank": rank, "clock_offset_us": offset_us, "clock_uncertainty_us": 10.0}})
    for off, unc in counter or []:
        events.append({"name": "sysprof clock", "ph": "C", "ts": ts, "pid": rank, "tid": 1,
                       "args": {"offset_us": off, "uncertainty_us": unc}})
    events.append({"name": "step", "ph": "X", "ts": ts, "dur": 10, "pid": rank, "tid": 1})
    path.write_text(json.dumps(events))
    return path


def test_rank_clock_and_shifts():
    assert rank_clock(json.loads(_file_text(0, 100, counter=[(-40.0, 9.0), (-55.0, 3.0), (-70.0, 5.0)]))) \
        == RankClock(0, 100, -55.0, 3.0)
    measured = {0: RankClock(0, 1, 0.0, 0.0), 1: RankClock(1, 2, -2500.4, 30.0), 2: RankClock(2, 3, 100.0, 5.0)}
    assert clock_shifts(measured) == {0: 0, 1: -2500, 2: 100}
    composer = {0: RankClock(0, 1000, None, None), 1: RankClock(1, 3500, -2500.0, 1.0), 2: RankClock(2, None, None, None)}
    assert clock_shifts(composer) == {0: 0, 1: -2500, 2: 0}  # not all measured: Composer's rule
    assert clock_shifts({}) == {}


def _file_text(rank, sync, counter):
    import pathlib
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        return _file(pathlib.Path(d) / "t.json", rank, sync, counter=counter).read_text()


def test_merge_applies_measured_offsets_and_agrees_with_composers_rule(tmp_path):
    # rank 1's clock is 2.5 ms ahead (offset -2500 us); the sync values follow trace_metadata: epoch - offset
    epoch = 5_000_000
    a = _file(tmp_path / "r0.json", 0, epoch, offset_us=0.0)
    b = _file(tmp_path / "r1.json", 1, epoch + 2500, offset_us=-2500.0, ts=1_002_500)
    merge_traces(tmp_path / "m.json", a, b)
    steps = {e["pid"]: e["ts"] for e in json.loads((tmp_path / "m.json").read_text()) if e.get("name") == "step"}
    assert steps == {0: 1_000_000, 1: 1_000_000}
    # the same files without sysprof's offsets: Composer's rule gives the same shift
    c = tmp_path / "c1.json"
    c.write_text(json.dumps([e for e in json.loads(b.read_text()) if e["name"] != "sysprof_rank"]))
    merge_traces(tmp_path / "m2.json", a, c)
    steps = {e["pid"]: e["ts"] for e in json.loads((tmp_path / "m2.json").read_text()) if e.get("name") == "step"}
    assert steps == {0: 1_000_000, 1: 1_000_000}


def test_timedelta_is_what_wait_gets():
    seen = []

    class S(FakeStore):
        def wait(self, keys, timeout):
            seen.append(timeout)
            super().wait(keys, timeout)

    s = S()
    s.set("k", "1")
    # torch's Store.wait takes a timedelta; one call blocks at most a slice (stop() and exit wait that long)
    assert distributed._wait(s, "k", 2.0) == b"1" and seen == [timedelta(seconds=distributed._WAIT_SLICE_S)]


def test_stop_ends_a_thread_blocked_in_a_store_wait():
    """Rank 1 waits for rank 0's epoch, which never comes: stop() ends its thread within a slice, not the 60 s
    timeout, so no thread is inside a store call when the interpreter exits (torch would abort the process)."""
    class Never(FakeStore):
        def wait(self, keys, timeout):
            time.sleep(timeout.total_seconds())  # a store whose key never comes: each call times out
            raise RuntimeError("Wait timeout")

    sync = ClockSync(Never(), rank=1, world_size=2, timeout_s=60).start()
    assert sync._thread.is_alive()
    sync.stop()
    sync._thread.join(30)  # (stop() itself waits at most 1 s)
    assert not sync._thread.is_alive() and sync.estimate is None


def test_trace_metadata_epoch_before_the_first_round(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    sync = ClockSync(FakeStore(), rank=1, world_size=2)
    sync.epoch_us = 10_000
    monkeypatch.setattr(distributed, "_current", sync)
    meta = trace_metadata(123, 4)
    assert meta["clock_sync_timestamp_us"] == {"value": 10_000} and meta["clock_sync_error_bound"] == {"value": 4}
    assert "clock_offset_us" not in meta["sysprof_rank"]


def test_system_profiler_samples_the_host_on_local_rank_0_only(monkeypatch):
    from sysprof import SystemProfiler

    for k, v in {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2"}.items():
        monkeypatch.setenv(k, v)
    kw = dict(profile_cpu=True, profile_memory=True, profile_process=True)
    sp = SystemProfiler(**kw)
    sp._rank = rank_info()  # as init() does
    on = {n for n, v in sp._sources().items() if v}
    assert on == {"process"}
    every = SystemProfiler(host_sampling="every_rank", **kw)
    every._rank = rank_info()
    assert {n for n, v in every._sources().items() if v} == {"cpu", "memory", "process"}
    with pytest.raises(ValueError, match="host_sampling"):
        SystemProfiler(host_sampling="per_rank")


def test_rank_gpu_follows_cuda_visible_devices():
    from sysprof.distributed import rank_gpu

    lr2 = RankInfo(rank=6, local_rank=2, world_size=8, local_world_size=4, node="n")
    assert rank_gpu(lr2, {}) == 2  # no CUDA_VISIBLE_DEVICES: cuda:2 is NVML index 2
    assert rank_gpu(lr2, {"CUDA_VISIBLE_DEVICES": "4,5,6,7"}) == 6  # the entry at the local rank
    assert rank_gpu(lr2, {"CUDA_VISIBLE_DEVICES": "GPU-aa,GPU-bb,GPU-cc"}) == "GPU-cc"
    assert rank_gpu(lr2, {"CUDA_VISIBLE_DEVICES": "3"}) == 3  # one GPU per rank: its only entry
    assert rank_gpu(lr2, {"CUDA_VISIBLE_DEVICES": "0,1"}) == 2  # fewer entries than ranks: the local rank
