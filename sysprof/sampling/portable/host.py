"""psutil backend: the same channels as the native sampler, read through psutil on a Python thread.

Used where the extension is missing or /proc is absent (macOS, Windows, BSD). It holds the GIL
while it samples, so it is slower and interferes with the main thread; it exists for portability.
Values psutil does not provide on a platform are NaN. The rules are the native ones (docs/reference.md,
csrc/derive/rules.hpp, stated in Python once in sysprof/sampling/portable/rules.py): ``Counter`` for kernel counters,
``TrailingRate`` for tick-stepped CPU time, the tick shares for /proc/stat percents, and ``PsutilSampler._run``
mirrors csrc/engine/sampler.cpp's ``Sampler::run``.
"""
from __future__ import annotations

import functools
import math
import os
import sys
import threading
import time

from typing import Dict, List, Optional, Tuple

import numpy as np
import psutil

from sysprof import forks

from ...text import text
from ..registry import SOURCES, TREE_SLOTS
from .rules import CounterDevice, Ticks, TrailingRate
from .tree import TreeReader

NAN = math.nan
CPU_MODES = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
# psutil reports Linux's 512-byte sectors as bytes; the counter (and its 32-bit wrap) is in sectors.
SECTOR = 512 if sys.platform.startswith("linux") else 1
# (channel field, psutil attribute, psutil units per kernel unit, channel units per kernel unit)
DISK_FIELDS = (("read_bytes", "read_bytes", SECTOR, SECTOR), ("write_bytes", "write_bytes", SECTOR, SECTOR),
               ("read_count", "read_count", 1, 1), ("write_count", "write_count", 1, 1),
               ("busy_time_seconds", "busy_time", 1, 1e-3), ("read_time_seconds", "read_time", 1, 1e-3),
               ("write_time_seconds", "write_time", 1, 1e-3))
DISK_RATES = ("read_bytes", "write_bytes", "read_count", "write_count", "busy_time_seconds")
NET_FIELDS = (("bytes_recv", "bytes_recv", 1, 1), ("bytes_sent", "bytes_sent", 1, 1),
              ("packets_recv", "packets_recv", 1, 1), ("packets_sent", "packets_sent", 1, 1),
              ("errors_in", "errin", 1, 1), ("errors_out", "errout", 1, 1),
              ("drops_in", "dropin", 1, 1), ("drops_out", "dropout", 1, 1))
NET_RATES = ("bytes_recv", "bytes_sent", "packets_recv", "packets_sent")
# Utilisation: io_ticks advance in whole jiffies, so a short window can over-count; capped at 1.
RATE_CAPS = {"busy_time_seconds": 1.0}


def _channels(source: str) -> List[str]:
    """The channel names of a source without devices, in row order, as the registry declares them."""
    return [c.pattern for c in SOURCES[source].channels]


def _cpus_of(proc) -> int:
    """The CPUs a process can run on (its affinity where psutil has it), else the online CPUs; at
    least 1. As csrc's online_cpus, they bound percent-of-one-core channels."""
    n = psutil.cpu_count() or 1
    try:
        if proc is not None and hasattr(proc, "cpu_affinity"):
            n = min(n, len(proc.cpu_affinity()) or n)
    except (psutil.Error, OSError):
        pass
    return max(1, n)


def _cpu_tuple(t) -> List[float]:
    return [float(getattr(t, m, 0.0)) for m in CPU_MODES]


class PsutilSampler:
    """Implements the interface sysprof.Sampler expects of a backend (see sampler.py)."""

    def __init__(self, interval: float, capacity: int, pid: Optional[int], sys_root: str,
                 periods: Optional[Dict[str, int]] = None, max_ring_bytes: int = 0, device_filter=None,
                 gpus=None, **flags: bool) -> None:
        """flags: one bool per source and option of the registry (``sampler.SOURCE_KEYWORDS``), absent = off.
        periods: deadlines between two reads of a source (``sampler._periods``), absent = 1.
        max_ring_bytes: non-zero: fewer rows than ``capacity`` where those would hold more bytes (at least 2),
        the native ring's rule (csrc/engine/sampler.hpp, ring_rows).
        device_filter: the disks and NICs sampled (``sampling.devices.DeviceFilter``; None: its default).
        gpus: the GPUs read, as ``sampling.gpus.selection()`` gives them (None: every GPU)."""
        self._gpus = gpus

        known = set(SOURCES) | {o.name for spec in SOURCES.values() for o in spec.options}
        for key in flags:
            if key not in known:
                raise TypeError(f"PsutilSampler() got an unexpected keyword argument {key!r}")
        self.interval = interval
        if device_filter is None:
            from ..devices import DeviceFilter
            device_filter = DeviceFilter()
        self._device_filter = device_filter
        self.errors: Dict[str, str] = {}
        for name, spec in SOURCES.items():
            if flags.get(name) and not spec.portable:  # e.g. PSI, cgroup files, vmstat: native readers only
                self.errors[name] = "only on the native backend"
        tree_slots = TREE_SLOTS.value(flags.get("process_tree_slots"))
        tree_period = max(1, int((periods or {}).get("process_tree", 1)))
        self._trees: List[TreeReader] = []  # the thread's process_tree reader first, then sample()'s
        builders = {"cpu": lambda: self._cpu(bool(flags.get("per_cpu"))), "memory": self._memory,
                    "disk": lambda: self._disk(sys_root), "net": self._net, "load": self._load,
                    "process": lambda: self._process(pid),
                    "process_tree": lambda: self._process_tree(pid, tree_slots, interval * tree_period),
                    "gpu": self._gpu}
        self._sources = [(name, builders[name]) for name, spec in SOURCES.items()
                         if spec.portable and flags.get(name)]
        self._gpu_state = None  # portable.nvml_query.NvmlState, shared by both readers
        self._readers = self._open_readers()
        self.channels: List[str] = [c for _, names, _ in self._readers for c in names]
        # The schedule, as csrc/engine/sampler.cpp's Collector::sample: per reader, its period and next due tick.
        self._period = [max(1, int((periods or {}).get(name, 1))) for name, _, _ in self._readers]
        self._next_due = [0] * len(self._readers)
        self._reads: Dict[str, int] = {name: 0 for name, _, _ in self._readers}
        self._sync = self._open_readers()  # sample() keeps its own baselines
        for tree in self._trees:  # as the GPU notes below: reported once both readers are open
            tree.flush(lambda msg: self.errors.__setitem__("process_tree", msg))
        self._gpu_devices: List[Dict[str, object]] = []
        if self._gpu_state is not None:
            self._gpu_devices = list(self._gpu_state.devices)
            # Notes (refused metrics, lost devices) are reported from now on; during the opening
            # above an entry in errors would have kept the second reader from opening.
            # (the errors dict, not self: the poller's thread holds this, and must not keep the sampler alive)
            self._gpu_state.report = functools.partial(self.errors.__setitem__, "gpu")
            self._gpu_state.flush()
        width = len(self.channels)
        if max_ring_bytes:
            capacity = max(2, min(capacity, max_ring_bytes // (8 * (width + 1))))
        self.capacity = capacity
        self._ts = np.zeros(capacity, dtype=np.int64)
        self._values = np.zeros((capacity, width), dtype=np.float64)
        self._capacity = capacity
        self._head = self._tail = self._dropped = self._missed = 0
        self._costs: List[int] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._latest: Optional[Tuple[int, int, bytes]] = None  # (seq, wall ns, values' bytes), swapped whole
        self._new_row = threading.Condition(self._lock)  # wait_next(): a row was published, or stop()
        forks.register(self)

    @property
    def devices(self) -> List[Dict[str, object]]:
        """The GPUs, then the thread's process_tree tenures (``Sampler.members``), as the native Sampler's."""
        return self._gpu_devices + (self._trees[0].describe() if self._trees else [])

    def _after_fork_in_child(self) -> None:
        """The sampling thread is not in a forked child and may have held the lock: start over unlocked.
        The parent's rows are not the child's: latest() is None there."""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None
        self._latest = None
        self._new_row = threading.Condition(self._lock)

    def _open_readers(self):
        """(name, channel names, read function) per usable source; a failing one is left out."""
        readers = []
        for name, build in self._sources:
            if name in self.errors:
                continue
            try:
                names, fn = build()
                fn(time.monotonic_ns())  # primes baselines and proves the source works here
            except Exception as exc:  # noqa: BLE001 - any failure disables this source only
                self.errors[name] = f"psutil: {type(exc).__name__}: {exc}"
                continue
            readers.append((name, names, fn))
        return readers

    # -- sources: each returns (channel names, read(mono_ns) -> values) --------------------------
    def _cpu(self, per_cpu: bool):
        """The native source's channels (csrc/sources/cpu.cpp): percents from deltas, and psutil's times by mode
        (seconds already) as the ``_seconds_total`` counters."""
        names = (["cpu/percent"] + [f"cpu/{m}_percent" for m in CPU_MODES] +
                 [f"cpu/{m}_seconds_total" for m in CPU_MODES])
        total = Ticks()
        n = len(psutil.cpu_times(percpu=True)) if per_cpu else 0
        per = [Ticks() for _ in range(n)]
        names += [f"cpu/{i}/percent" for i in range(n)]
        names += [f"cpu/{i}/{m}_seconds_total" for i in range(n) for m in CPU_MODES]

        def read(_t: int) -> List[float]:
            now = _cpu_tuple(psutil.cpu_times())
            out = list(total.update(now)) + now
            if n:
                times = psutil.cpu_times(percpu=True)
                each = [_cpu_tuple(times[i]) if i < len(times) else None for i in range(n)]
                out += [st.update(t)[0] for st, t in zip(per, each)]
                for t in each:
                    out += t if t is not None else [NAN] * len(CPU_MODES)
            return out
        return names, read

    def _memory(self):
        def read(_t: int) -> List[float]:
            vm, sw = psutil.virtual_memory(), psutil.swap_memory()
            # as csrc/sources/meminfo.cpp: free and available at most the total (wrapped negatives)
            total, swap_total = float(vm.total), float(sw.total)
            avail, free = min(float(vm.available), total), min(float(vm.free), total)
            swap_free = min(float(sw.free), swap_total)
            used = total - avail
            # cached_bytes is the kernel's Cached: psutil's `cached` adds SReclaimable (the reclaimable slab), a
            # different quantity under the same name, and psutil gives neither part alone: NaN, as Dirty/Writeback
            return [total, avail, used, free,
                    float(getattr(vm, "buffers", NAN)), NAN,
                    NAN, NAN, 100.0 * used / total if total else NAN,
                    swap_total, swap_total - swap_free, swap_free]
        return _channels("memory"), read

    def _disk(self, sys_root: str):
        block = os.path.join(sys_root, "block")
        # Whole disks only, as the native source: names listed in /sys/block (where there is one).
        keeps = self._device_filter.keeps
        whole = ((lambda d: os.path.exists(os.path.join(block, d.replace("/", "!"))))
                 if os.path.isdir(block) else (lambda d: True))
        keep = (lambda d: keeps("disk", d) and whole(d))
        return self._devices("disk", lambda: psutil.disk_io_counters(perdisk=True, nowrap=False),
                             keep, DISK_FIELDS, DISK_RATES)

    def _net(self):
        return self._devices("net", lambda: psutil.net_io_counters(pernic=True, nowrap=False),
                             lambda n: self._device_filter.keeps("net", n), NET_FIELDS, NET_RATES)

    @staticmethod
    def _devices(kind: str, read_all, keep, fields, rates):
        """Per-device raw counters (``Counter`` rules) in the kernel's listing order (psutil keeps it)."""
        state = {d: CounterDevice(fields, rates, RATE_CAPS) for d in (read_all() or {}) if keep(d)}
        names = [f"{kind}/{text(d)}/{f}" for d in state  # a device name is bytes to the kernel
                 for f in [f[0] for f in fields] + [r + "_per_second" for r in rates]]

        def read(t: int) -> List[float]:
            now = read_all() or {}
            out: List[float] = []
            for d, dev in state.items():
                out += dev.row(now.get(d), t)
            return out
        return names, read

    def _load(self):
        def read(_t: int) -> List[float]:
            one, five, fifteen = psutil.getloadavg()
            return [one, five, fifteen, NAN, NAN]
        return _channels("load"), read

    def _process(self, pid: Optional[int]):
        proc = psutil.Process(pid)
        # This process: its CPU-time clock (ns over all threads), as the native source on the live
        # /proc; another one: psutil's utime+stime, whole ticks, which TrailingRate smooths.
        own = pid is None or pid == os.getpid()
        rate = TrailingRate()
        cap = 100.0 * _cpus_of(proc)  # percent of one core: at most what its CPUs can run

        def read(_t: int) -> List[float]:
            try:
                with proc.oneshot():
                    mem, threads = proc.memory_info(), proc.num_threads()
                gone = mem.vms == 0  # exiting: the memory map is dropped before it turns zombie
            except psutil.NoSuchProcess:  # ZombieProcess included
                gone = True
            if own:
                cpu_ns = time.process_time_ns()
            else:
                try:  # a reaped process raises NoSuchProcess: the row reads NaN, named in errors
                    ct = proc.cpu_times()
                    cpu_ns = round((ct.user + ct.system) * 1e9)
                except psutil.ZombieProcess:
                    cpu_ns = None
            if cpu_ns is None:
                return [NAN] * 5
            pct = min(rate.update(time.monotonic_ns(), cpu_ns) / 1e7, cap)  # paired with the CPU reading
            if gone:
                return [NAN, NAN, NAN, cpu_ns / 1e9, NAN]
            return [float(mem.rss), float(mem.vms), pct, cpu_ns / 1e9, float(threads)]
        return _channels("process"), read

    def _process_tree(self, pid: Optional[int], slots: int, interval_s: float):
        """The process and its descendants, summed and per member in slots: portable/tree.py."""
        reader = TreeReader(pid, slots, interval_s, 100.0 * _cpus_of(None))
        self._trees.append(reader)
        return reader.channels, reader.read

    def _gpu(self):
        from .nvml import open_gpu
        self._gpu_state, names, read = open_gpu(self._gpu_state, self._gpus)
        return list(names), lambda t: read(t / 1e9)  # the NVML reader takes seconds

    # -- sampling -----------------------------------------------------------------------------
    def _row(self, readers, t: int, tick: Optional[int] = None, prev: Optional[np.ndarray] = None) -> np.ndarray:
        """Reads every reader (``tick`` None: sample(), the row at stop), or at a thread's tick only those due,
        the others repeating their slice of ``prev`` (the previous row)."""
        out: List[float] = []
        if tick == 0:  # a new run: its first row reads every source
            self._next_due = [0] * len(self._next_due)
        for i, (name, names, fn) in enumerate(readers):
            if tick is not None and not self._due(i, tick):
                out += prev[len(out):len(out) + len(names)].tolist()
                continue
            if readers is self._readers:
                self._reads[name] += 1
            try:
                out += fn(t)
            except Exception as exc:  # noqa: BLE001 - a failing source reads NaN, others go on
                self.errors[name] = f"psutil: {type(exc).__name__}: {exc}"
                out += [NAN] * len(names)
        return np.asarray(out, dtype=np.float64)

    def _due(self, i: int, tick: int) -> bool:
        """Whether reader i is read at ``tick``: at the first tick at or after each multiple of its period."""
        if tick < self._next_due[i]:
            return False
        k = self._period[i]
        self._next_due[i] += k
        if self._next_due[i] <= tick:  # deadlines were missed: the next multiple after this tick
            self._next_due[i] = (tick // k + 1) * k
        return True

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="sysprof-psutil", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self._new_row:  # wait_next() callers return None
            self._new_row.notify_all()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        """csrc/engine/sampler.cpp's ``Sampler::run``: a row at start (rates since construction or the
        previous stop), rows on absolute deadlines (a missed one is skipped and counted, never made
        up), and a last row at stop unless one was taken within min(interval / 2, 1 ms). Tick k is the
        deadline first + k * interval; the first row and the one at stop read every source, the others
        those due (``_row``)."""
        interval = max(1, int(round(self.interval * 1e9)))
        next_ns, last = time.monotonic_ns(), None
        first, row = next_ns, None
        while True:
            stopping = self._stop.wait(max(0.0, (next_ns - time.monotonic_ns()) / 1e9))
            t0 = time.monotonic_ns()
            if stopping and last is not None and t0 - last < min(interval // 2, 1_000_000):
                break  # a row just taken
            wall = time.time_ns()
            row = self._row(self._readers, t0, None if stopping else (next_ns - first) // interval, row)
            with self._lock:
                if self._head - self._tail >= self._capacity:
                    self._dropped += 1
                else:
                    i = self._head % self._capacity
                    self._ts[i], self._values[i] = wall, row
                    self._head += 1
                self._latest = (self._head + self._dropped, wall, row.tobytes())  # seq counts as stats' taken
                self._new_row.notify_all()
            t1 = time.monotonic_ns()
            self._costs.append(t1 - t0)
            if len(self._costs) > 100000:
                del self._costs[:50000]
            last = t0
            if stopping:
                break
            next_ns += interval
            if t1 >= next_ns:  # overran: skip the passed deadlines, no burst
                skipped = (t1 - next_ns) // interval + 1
                self._missed += skipped
                next_ns += skipped * interval

    def sample(self) -> Tuple[int, np.ndarray]:
        wall = time.time_ns()
        return wall, self._row(self._sync, time.monotonic_ns())

    def latest(self) -> Optional[Tuple[int, int, bytes]]:
        return self._latest  # one tuple, replaced whole by the thread: no lock needed

    def wait_next(self, after: int, timeout: float) -> Optional[Tuple[int, int, bytes]]:
        """As the native wait_next: a row numbered above ``after`` (< 0: the latest's), or None after
        ``timeout`` s (< 0: no limit) or when not running (stop() notifies)."""
        deadline = None if timeout < 0 else time.monotonic() + timeout
        with self._new_row:
            last = self._latest
            after = (last[0] if last else 0) if after < 0 else after
            while True:
                if self._stop.is_set() or not self.running:  # first, as the native: stopping gives None
                    return None
                if self._latest is not None and self._latest[0] > after:
                    return self._latest
                left = 0.1 if deadline is None else min(0.1, deadline - time.monotonic())  # re-checks running
                if left <= 0:
                    return None
                self._new_row.wait(left)

    def drain(self, max_rows: int) -> Tuple[np.ndarray, np.ndarray]:
        with self._lock:
            n = self._head - self._tail
            if max_rows >= 0:
                n = min(n, max_rows)
            idx = (np.arange(self._tail, self._tail + n) % self._capacity)
            ts, values = self._ts[idx].copy(), self._values[idx].copy()
            self._tail += n
        return ts, values

    @property
    def stats(self) -> Dict[str, float]:
        with self._lock:
            head, tail, dropped = self._head, self._tail, self._dropped
        # Plain Python, not numpy's percentile: numpy's partition releases the GIL inside C++ code, which
        # aborts the process when a daemon thread is there as the interpreter exits.
        costs = sorted(self._costs[-10000:])
        n = len(costs)
        return {"taken": head + dropped, "dropped": dropped, "drained": tail,
                "buffered": head - tail, "missed_deadlines": self._missed,
                "sample_ns_mean": sum(costs) / n if n else NAN,
                "sample_ns_p99": float(costs[max(0, math.ceil(0.99 * n) - 1)]) if n else NAN,  # nearest rank
                "sample_ns_max": float(costs[-1]) if n else NAN, "reads": dict(self._reads)}
