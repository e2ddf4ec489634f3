"""Distributed jobs: which rank this process is (:func:`rank_info`), which sources it samples (:func:`plan_sources`:
one host sampler per node) and how its clock relates to rank 0's (:class:`ClockSync`).

**Rank discovery** (one place; ``torch`` is never imported here, only used when the program already imported it):

1. ``torch.distributed`` when a process group is initialized: rank and world size from it; local rank and local
   world size from ``LOCAL_RANK`` / ``LOCAL_WORLD_SIZE`` (torchrun, Composer's launcher), else Slurm's;
2. else ``RANK`` / ``LOCAL_RANK`` / ``WORLD_SIZE`` / ``LOCAL_WORLD_SIZE`` (torchrun, Composer's launcher,
   ``torch.distributed.launch``);
3. else Slurm's ``SLURM_PROCID`` / ``SLURM_LOCALID`` / ``SLURM_NTASKS`` / ``SLURM_NTASKS_PER_NODE``;
4. else a single process: rank 0 of 1.

The node is the host name (:func:`platform.node`). Every trace sysprof writes carries ``rank``, ``local_rank``,
``node``, ``world_size`` and ``local_world_size``: ``sysprof record``'s start event, and (in a distributed job;
a single process's files stay exactly Composer's, ``global_rank`` 0) the ``sysprof_rank`` metadata event of
:class:`~sysprof.JSONTraceHandler`'s (and the ``.pftrace`` handler's) files.

**One host sampler per node.** In a distributed job (world size > 1), :class:`~sysprof.SystemProfiler` and
:func:`sysprof.profile` sample the host's sources (cpu, memory, disk, net, load, pressure, vmstat) only on local
rank 0; every rank samples its own process (``process``, ``process_tree``, ``cgroup``: the sources that follow a
pid) and its own GPU (the CUDA device ``local_rank`` — passed as ``Sampler(gpus=[i])`` where the sampler accepts
it, see :func:`gpu_keywords`). ``host_sampling="every_rank"`` samples the host on every rank (as before).

**Clock alignment.** :class:`ClockSync` runs on a daemon thread of each rank, over the process group's store
(``TCPStore`` ``set``/``get``; no collective, nothing on the training path). At start and every ``period_s``
(300 s) rank ``r`` makes ``samples`` (8) exchanges with rank 0: it notes its time ``t1``, sets a request key, rank
0's thread answers with its own time ``t0``, and ``r`` notes ``t2`` on reading it. Rank 0's time was taken inside
``[t1, t2]``, so ``offset = t0 - (t1 + t2) / 2`` is off by at most ``(t2 - t1) / 2``; the sample with the
smallest round trip wins (NTP's rule): ``offset_us`` (rank 0's clock minus this rank's) and ``uncertainty_us``
(half that round trip). Each round goes into the trace as the counter ``sysprof clock`` (args ``offset_us``,
``uncertainty_us``), and the cycle metadata write Composer's ``clock_sync_timestamp_us`` as rank 0's start time
on this rank's clock (``epoch_us - offset_us``) with ``clock_sync_error_bound`` = ``uncertainty_us``, so
Composer's merger (which shifts a rank by ``sync(lowest rank) - sync(rank)``) and sysprof's
(:mod:`sysprof.trace.merge`, which applies ``offset_us``) shift every rank the same way.
"""
from __future__ import annotations

import atexit
import logging
import os
import platform
import sys
import threading
import time
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any, Callable, Dict, Mapping, Optional

__all__ = ["RankInfo", "rank_info", "torch_dist", "plan_sources", "gpu_keywords", "HOST_SAMPLING", "ClockSync",
           "ClockEstimate", "current_clock", "trace_metadata", "CLOCK_COUNTER", "RANK_EVENT"]

log = logging.getLogger(__name__)

#: the counter each clock-sync round writes (args ``offset_us``, ``uncertainty_us``)
CLOCK_COUNTER = "sysprof clock"
#: the metadata event naming the rank of a trace file (args: :meth:`RankInfo.as_dict` and the clock estimate)
RANK_EVENT = "sysprof_rank"
#: ``host_sampling`` values: ``"per_node"`` (host sources on local rank 0 only) or ``"every_rank"``
HOST_SAMPLING = ("per_node", "every_rank")


@dataclass(frozen=True)
class RankInfo:
    """Where this process sits in its job (see the module docstring for where each value comes from)."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1
    node: str = ""
    source: str = "none"  # "torch.distributed", "env", "slurm" or "none"

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def as_dict(self) -> Dict[str, Any]:
        """``rank``, ``local_rank``, ``node``, ``world_size``, ``local_world_size`` (the trace metadata)."""
        d = asdict(self)
        del d["source"]
        return d


def torch_dist() -> Any:
    """``torch.distributed`` if the program imported it and initialized a process group, else None."""
    td = sys.modules.get("torch.distributed")
    try:
        if td is not None and td.is_available() and td.is_initialized():
            return td
    except Exception:  # noqa: BLE001 - a broken torch is no distributed job
        pass
    return None


def _int(env: Mapping[str, str], *names: str) -> Optional[int]:
    for name in names:
        text = str(env.get(name, "")).strip()
        head = text.split("(")[0].split(",")[0]  # SLURM_TASKS_PER_NODE: "4(x2)" or "4,2"
        if head.isdigit():
            return int(head)
    return None


def rank_info(env: Optional[Mapping[str, str]] = None) -> RankInfo:
    """This process's :class:`RankInfo` (``env``: the environment to read, default ``os.environ``)."""
    env = os.environ if env is None else env
    node = platform.node()
    rank, world = _int(env, "RANK"), _int(env, "WORLD_SIZE")
    local, local_world = _int(env, "LOCAL_RANK"), _int(env, "LOCAL_WORLD_SIZE")
    source = "env" if rank is not None or world is not None else "none"
    if rank is None and world is None and _int(env, "SLURM_PROCID") is not None:
        rank, world = _int(env, "SLURM_PROCID"), _int(env, "SLURM_NTASKS")
        source = "slurm"
    if local is None:
        local = _int(env, "SLURM_LOCALID")
    if local_world is None:
        local_world = _int(env, "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE")
    td = torch_dist()
    if td is not None:
        try:
            rank, world, source = td.get_rank(), td.get_world_size(), "torch.distributed"
        except Exception:  # noqa: BLE001
            pass
    rank, world = rank or 0, max(1, world or 1)
    local_world = max(1, local_world or world)  # unknown: one node
    local = local if local is not None else rank % local_world
    return RankInfo(rank, local, world, local_world, node, source)


def plan_sources(sources: Mapping[str, bool], info: RankInfo, host_sampling: str = "per_node") -> Dict[str, bool]:
    """The sources this rank samples, from the ones asked for: in a distributed job with ``host_sampling``
    ``"per_node"``, only local rank 0 keeps the host sources; the per-process sources (those that follow a pid)
    and the GPU (restricted to the rank's device by :func:`gpu_keywords`) stay on every rank.

    Raises:
        ValueError: ``host_sampling`` is not one of :data:`HOST_SAMPLING`.
    """
    from sysprof.sampling.registry import SOURCES

    if host_sampling not in HOST_SAMPLING:
        raise ValueError(f"host_sampling must be one of {HOST_SAMPLING}, got {host_sampling!r}")
    if host_sampling == "every_rank" or not info.distributed or info.local_rank == 0:
        return dict(sources)
    own = {n for n, spec in SOURCES.items() if spec.follows_pid} | {"gpu"}
    return {n: bool(on) and n in own for n, on in sources.items()}


def gpu_keywords(sampler_class: Any, sources: Mapping[str, bool], info: RankInfo,
                 host_sampling: str = "per_node") -> Dict[str, Any]:
    """The rank's own GPU: ``{"gpus": [entry]}`` when the job is distributed, the GPU is sampled per node, and
    ``sampler_class`` takes a ``gpus`` keyword; else ``{}`` (every GPU the sampler sees). ``entry`` is the rank's
    CUDA device as NVML knows it (:func:`rank_gpu`)."""
    import inspect

    if not sources.get("gpu") or not info.distributed or host_sampling == "every_rank":
        return {}
    try:
        takes = "gpus" in inspect.signature(sampler_class).parameters
    except (TypeError, ValueError):
        takes = False
    return {"gpus": [rank_gpu(info)]} if takes else {}


def rank_gpu(info: RankInfo, environ: Optional[Mapping[str, str]] = None) -> Any:
    """The rank's CUDA device (``cuda:<local_rank>``, the launchers' convention) as a ``Sampler(gpus=...)`` entry:
    the ``CUDA_VISIBLE_DEVICES`` entry at that position (an NVML index, a ``GPU-``/``MIG-`` UUID), the only entry
    where each rank is given one GPU, else the local rank itself (an NVML index, which is CUDA's order under
    ``CUDA_DEVICE_ORDER=PCI_BUS_ID``)."""
    env = os.environ if environ is None else environ
    visible = [e.strip() for e in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if e.strip()]
    if not visible:
        return info.local_rank
    entry = visible[info.local_rank] if info.local_rank < len(visible) else visible[0] if len(visible) == 1 else None
    if entry is None:
        return info.local_rank
    return int(entry) if entry.isdigit() else entry


@dataclass(frozen=True)
class ClockEstimate:
    """One clock-sync round: ``offset_us`` = rank 0's clock - this rank's clock, ``uncertainty_us`` (its bound),
    ``epoch_us`` (rank 0's time when its sync started), ``rtt_us`` of the chosen sample, ``at_ns`` (local time)."""

    offset_us: float
    uncertainty_us: float
    epoch_us: int
    rtt_us: float
    at_ns: int


_current: Optional["ClockSync"] = None  # the running ClockSync of this process


def current_clock() -> Optional[ClockEstimate]:
    """The newest estimate of this process's running :class:`ClockSync`, or None."""
    sync = _current
    return sync.estimate if sync is not None else None


def trace_metadata(sync_us: int, bound_us: int) -> Dict[str, dict]:
    """The metadata events of a trace cycle (name -> args), for :class:`~sysprof.JSONTraceHandler`: Composer's
    ``clock_sync_timestamp_us`` / ``clock_sync_error_bound`` (``sync_us`` / ``bound_us``, its barrier-based values,
    unless a :class:`ClockSync` runs: then ``epoch_us - offset_us`` and ``uncertainty_us``; the first round is
    waited for up to 5 s, after which a rank that knows the epoch but has no round yet writes the epoch, i.e.
    offset 0 with the barrier's bound) and, in a distributed job, :data:`RANK_EVENT` (the rank, node, world size and the clock
    estimate)."""
    sync = _current
    estimate = sync.wait_first(5.0) if sync is not None else None
    info = rank_info()
    rank = info.as_dict()
    if estimate is not None:
        sync_us = int(round(estimate.epoch_us - estimate.offset_us))
        bound_us = int(round(estimate.uncertainty_us))
        rank.update(clock_offset_us=estimate.offset_us, clock_uncertainty_us=estimate.uncertainty_us)
    elif sync is not None and sync.epoch_us is not None:  # no round done yet: offset taken as 0, so that the
        sync_us = sync.epoch_us  # ranks' values stay coherent (each is rank 0's epoch on its own clock)
    out = {"clock_sync_timestamp_us": {"value": sync_us}, "clock_sync_error_bound": {"value": bound_us}}
    if info.distributed:  # a single process's files stay exactly Composer's
        out[RANK_EVENT] = rank
    return out


_WAIT_SLICE_S = 0.1  # the longest one store call blocks: stop() (and interpreter exit) waits at most about this


def _wait(store: Any, key: str, timeout_s: float, stop: Optional[threading.Event] = None) -> bytes:
    """``store.get(key)`` once ``key`` exists, waiting at most ``timeout_s`` (raises on timeout), in ``store.wait``
    calls of at most ``_WAIT_SLICE_S``, so a set ``stop`` ends the wait within one slice (raising): no thread is
    left inside a store call when the interpreter exits (torch aborts the process then). A call that fails faster
    than half a slice is no timeout (a store gone): raised at once."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        t0 = time.monotonic()
        try:
            store.wait([key], timedelta(seconds=max(0.01, min(_WAIT_SLICE_S, left))))
            return store.get(key)
        except Exception:
            if (stop is not None and stop.is_set()) or left <= _WAIT_SLICE_S \
                    or time.monotonic() - t0 < _WAIT_SLICE_S / 2:
                raise


class ClockSync:
    """Measure this rank's clock offset to rank 0 over a ``torch.distributed`` store, on a daemon thread.

    Args:
        store: an object with ``set(key, value)``, ``get(key)`` and ``wait([keys], timedelta)`` (a
            ``torch.distributed.Store``; default: the initialized process group's, under the prefix
            ``sysprof/clock/``).
        rank, world_size: default from :func:`rank_info`.
        samples: exchanges per round (the one with the least round trip is kept).
        period_s: seconds between rounds after the first.
        on_estimate: called with each round's :class:`ClockEstimate` (on the sync thread; exceptions are logged).
        timeout_s: how long one exchange waits for the other side before the round is given up.
        clock: the clock compared (ns since the epoch; default :func:`time.time_ns`, the traces' clock).

    Rank 0 answers every other rank's exchanges (its estimate is offset 0, uncertainty 0). :meth:`start` returns at
    once; a failing store (a rank gone, the job ending) ends the thread quietly. Nothing here runs on the caller's
    thread but :meth:`start` and :meth:`stop` (which waits up to 1 s for the thread to leave its store call; a wait
    is sliced into calls of 0.1 s, and the process's exit stops the thread first).
    """

    def __init__(self, store: Any = None, rank: Optional[int] = None, world_size: Optional[int] = None, *,
                 samples: int = 8, period_s: float = 300.0, on_estimate: Any = None, timeout_s: float = 60.0,
                 clock: Callable[[], int] = time.time_ns) -> None:
        info = rank_info() if rank is None or world_size is None else None
        self.rank = info.rank if rank is None else int(rank)
        self.world_size = info.world_size if world_size is None else int(world_size)
        self.samples, self.period_s, self.timeout_s = max(1, int(samples)), float(period_s), float(timeout_s)
        self.on_estimate = on_estimate
        self.clock = clock
        self.store = store
        self.estimate: Optional[ClockEstimate] = None
        self.epoch_us: Optional[int] = None  # rank 0's time at its start, once known
        self.rounds = 0
        self._first = threading.Event()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    @staticmethod
    def default_store() -> Any:
        """The initialized process group's store under ``sysprof/clock/``, or None."""
        td = torch_dist()
        if td is None:
            return None
        try:
            from torch.distributed import distributed_c10d as c10d

            return td.PrefixStore("sysprof/clock/", c10d._get_default_store())
        except Exception:  # noqa: BLE001 - no store we can use: no clock sync
            return None

    def start(self) -> "ClockSync":
        global _current
        if self.store is None:
            self.store = self.default_store()
        if self.store is None or self.world_size < 2:
            return self
        _current = self
        self._thread = threading.Thread(target=self._run, name=f"sysprof-clock-{self.rank}", daemon=True)
        self._thread.start()
        atexit.register(self.stop)  # before finalization: the thread out of any store call
        return self

    def stop(self) -> None:
        """Ends the thread: it leaves a store call within ``_WAIT_SLICE_S``, which this waits for (at most 1 s)."""
        global _current
        self._stop.set()
        if _current is self:
            _current = None
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(1.0)

    def wait_first(self, timeout_s: float) -> Optional[ClockEstimate]:
        """The estimate, waiting up to ``timeout_s`` for the first round when it runs."""
        if self._thread is not None:
            self._first.wait(timeout_s)
        return self.estimate

    # ------------------------------------------------------------------ the thread
    def _run(self) -> None:
        try:
            k = 0
            while not self._stop.is_set():
                estimate = self._serve(k) if self.rank == 0 else self._measure(k)
                if estimate is not None:
                    self._publish(estimate)
                k += 1
                if self._stop.wait(self.period_s):
                    break
        except Exception as e:  # noqa: BLE001 - the store went away (job ending) or a rank died
            log.debug("sysprof clock sync stopped: %s", e)
        finally:
            self._first.set()

    def _publish(self, estimate: ClockEstimate) -> None:
        self.estimate = estimate
        self.rounds += 1
        self._first.set()
        if self.on_estimate is not None:
            try:
                self.on_estimate(estimate)
            except Exception:  # noqa: BLE001
                log.exception("sysprof clock sync: on_estimate failed")

    def _serve(self, k: int) -> None:
        """Rank 0: publish the epoch (first round) and its own estimate (offset 0, known at once), then answer
        each other rank's exchanges of round ``k``."""
        store = self.store
        now = self.clock()
        if k == 0:
            self.epoch_us = now // 1000
            store.set("epoch", str(self.epoch_us))
        self._publish(ClockEstimate(0.0, 0.0, self.epoch_us, 0.0, now))  # the reference
        for r in range(1, self.world_size):
            for i in range(self.samples):
                if self._stop.is_set():
                    return
                try:
                    _wait(self.store, f"q/{k}/{r}/{i}", self.timeout_s, self._stop)
                except Exception:  # noqa: BLE001 - that rank is late or gone: the next one
                    break
                store.set(f"a/{k}/{r}/{i}", str(self.clock()))

    def _measure(self, k: int) -> Optional[ClockEstimate]:
        """Rank r > 0: ``samples`` exchanges of round ``k``; the one with the least round trip."""
        store = self.store
        best = None
        try:
            epoch_us = self.epoch_us = int(_wait(store, "epoch", self.timeout_s, self._stop))
            for i in range(self.samples):
                t1 = self.clock()
                store.set(f"q/{k}/{self.rank}/{i}", b"1")
                t0 = int(_wait(store, f"a/{k}/{self.rank}/{i}", self.timeout_s, self._stop))
                t2 = self.clock()
                if best is None or t2 - t1 < best[0]:
                    best = (t2 - t1, t0 - (t1 + t2) / 2)
        except Exception as e:  # noqa: BLE001 - rank 0 late or gone: no estimate this round
            log.debug("sysprof clock sync round %d: %s", k, e)
            if best is None:
                return None
        rtt_ns, offset_ns = best
        return ClockEstimate(offset_ns / 1000.0, rtt_ns / 2000.0, epoch_us, rtt_ns / 1000.0, self.clock())
