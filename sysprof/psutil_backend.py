"""psutil backend: the same channels as the native sampler, read through psutil on a Python thread.

Used where the extension is missing or /proc is absent (macOS, Windows, BSD). It holds the GIL
while it samples, so it is slower and interferes with the main thread; it exists for portability.
Values psutil does not provide on a platform are NaN.
"""
from __future__ import annotations

import math
import os
import threading
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import psutil

NAN = math.nan
CPU_MODES = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
DISK_FIELDS = ("read_bytes", "write_bytes", "read_count", "write_count", "busy_time_seconds",
               "read_time_seconds", "write_time_seconds")
DISK_RATES = ("read_bytes", "write_bytes", "read_count", "write_count", "busy_time_seconds")
NET_FIELDS = ("bytes_recv", "bytes_sent", "packets_recv", "packets_sent", "errors_in", "errors_out",
              "drops_in", "drops_out")
NET_RATES = ("bytes_recv", "bytes_sent", "packets_recv", "packets_sent")
MEMORY_CHANNELS = ("memory/total_bytes", "memory/available_bytes", "memory/used_bytes",
                   "memory/free_bytes", "memory/buffers_bytes", "memory/cached_bytes",
                   "memory/dirty_bytes", "memory/writeback_bytes", "memory/used_percent",
                   "swap/total_bytes", "swap/used_bytes", "swap/free_bytes")


class _Ticks:
    """Percent from tick deltas, held while no tick elapses (same rule as the native cpu source)."""

    def __init__(self) -> None:
        self.prev: Optional[List[float]] = None
        self.last = [NAN] * (len(CPU_MODES) + 1)

    def update(self, now: Optional[Sequence[float]]) -> List[float]:
        if now is None:  # offline
            self.prev, self.last = None, [NAN] * (len(CPU_MODES) + 1)
            return self.last
        if self.prev is None:
            self.prev = list(now)
            return self.last
        d = [max(0.0, n - p) for n, p in zip(now, self.prev)]
        total = sum(d)
        if total > 0:
            busy = total - d[3] - d[4]
            self.last = [100.0 * busy / total] + [100.0 * x / total for x in d]
            self.prev = list(now)
        return self.last


def _cpu_tuple(t) -> List[float]:
    return [float(getattr(t, m, 0.0)) for m in CPU_MODES]


class _Counters:
    """Totals and per-second rates of named counters per device, from psutil's nowrap counters."""

    def __init__(self, fields: Sequence[str], rates: Sequence[str]) -> None:
        self.fields, self.rates = tuple(fields), tuple(rates)
        self.prev: Dict[str, Tuple[float, Dict[str, float]]] = {}

    def row(self, dev: str, now: Optional[Dict[str, float]], t: float) -> List[float]:
        if now is None:
            self.prev.pop(dev, None)
            return [NAN] * (len(self.fields) + len(self.rates))
        out = [now[f] for f in self.fields]
        prev = self.prev.get(dev)
        for f in self.rates:
            if prev is None or t <= prev[0]:
                out.append(NAN)
            else:
                out.append(max(0.0, now[f] - prev[1][f]) / (t - prev[0]))
        self.prev[dev] = (t, now)
        return out


def _disk_values(d) -> Dict[str, float]:
    ms = lambda name: getattr(d, name) / 1000.0 if hasattr(d, name) else NAN  # noqa: E731
    return {"read_bytes": float(d.read_bytes), "write_bytes": float(d.write_bytes),
            "read_count": float(d.read_count), "write_count": float(d.write_count),
            "busy_time_seconds": ms("busy_time"), "read_time_seconds": ms("read_time"),
            "write_time_seconds": ms("write_time")}


def _net_values(n) -> Dict[str, float]:
    return {"bytes_recv": float(n.bytes_recv), "bytes_sent": float(n.bytes_sent),
            "packets_recv": float(n.packets_recv), "packets_sent": float(n.packets_sent),
            "errors_in": float(n.errin), "errors_out": float(n.errout),
            "drops_in": float(n.dropin), "drops_out": float(n.dropout)}


class PsutilSampler:
    """Implements the interface sysprof.Sampler expects of a backend (see sampler.py)."""

    def __init__(self, interval: float, capacity: int, pid: Optional[int], sys_root: str,
                 cpu: bool, per_cpu: bool, memory: bool, disk: bool, net: bool, load: bool,
                 process: bool, gpu: bool, pressure: bool = False, cgroup: bool = False) -> None:
        self.interval = interval
        self.errors: Dict[str, str] = {}
        for name, enabled in (("pressure", pressure), ("cgroup", cgroup)):
            if enabled:  # psutil has no PSI or cgroup API; the native sampler reads those files
                self.errors[name] = "only on the native backend"
        self._sources = [(name, build) for name, enabled, build in (
            ("cpu", cpu, lambda: self._cpu(per_cpu)), ("memory", memory, self._memory),
            ("disk", disk, lambda: self._disk(sys_root)), ("net", net, self._net),
            ("load", load, self._load), ("process", process, lambda: self._process(pid)),
            ("gpu", gpu, self._gpu))
            if enabled]
        self._gpu_state = None  # gpu_pynvml.NvmlState, shared by both readers
        self._readers = self._open_readers()
        self.channels: List[str] = [c for _, names, _ in self._readers for c in names]
        self._sync = self._open_readers()  # sample() keeps its own baselines
        self.devices: List[Dict[str, object]] = []
        if self._gpu_state is not None:
            self.devices = list(self._gpu_state.devices)
            # Notes (refused metrics, lost devices) are reported from now on; during the opening
            # above an entry in errors would have kept the second reader from opening.
            self._gpu_state.report = lambda msg: self.errors.__setitem__("gpu", msg)
            self._gpu_state.flush()
        width = len(self.channels)
        self._ts = np.zeros(capacity, dtype=np.int64)
        self._values = np.zeros((capacity, width), dtype=np.float64)
        self._capacity = capacity
        self._head = self._tail = self._dropped = self._missed = 0
        self._costs: List[int] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def _open_readers(self):
        """(name, channel names, read function) per usable source; a failing one is left out."""
        readers = []
        for name, build in self._sources:
            if name in self.errors:
                continue
            try:
                names, fn = build()
                fn(time.monotonic())  # primes baselines and proves the source works here
            except Exception as exc:  # noqa: BLE001 - any failure disables this source only
                self.errors[name] = f"psutil: {type(exc).__name__}: {exc}"
                continue
            readers.append((name, names, fn))
        return readers

    # -- sources ------------------------------------------------------------------------------
    def _cpu(self, per_cpu: bool):
        names = ["cpu/percent"] + [f"cpu/{m}_percent" for m in CPU_MODES]
        total = _Ticks()
        n = len(psutil.cpu_times(percpu=True)) if per_cpu else 0
        per = [_Ticks() for _ in range(n)]
        names += [f"cpu/{i}/percent" for i in range(n)]

        def read(_t: float) -> List[float]:
            out = list(total.update(_cpu_tuple(psutil.cpu_times())))
            if n:
                times = psutil.cpu_times(percpu=True)
                for i, st in enumerate(per):
                    out.append(st.update(_cpu_tuple(times[i]) if i < len(times) else None)[0])
            return out
        return names, read

    def _memory(self):
        def read(_t: float) -> List[float]:
            vm, sw = psutil.virtual_memory(), psutil.swap_memory()
            used = max(0.0, float(vm.total - vm.available))
            return [float(vm.total), float(vm.available), used, float(vm.free),
                    float(getattr(vm, "buffers", NAN)), float(getattr(vm, "cached", NAN)),
                    NAN, NAN, 100.0 * used / vm.total if vm.total else NAN,
                    float(sw.total), max(0.0, float(sw.total - sw.free)), float(sw.free)]
        return list(MEMORY_CHANNELS), read

    def _disk(self, sys_root: str):
        block = os.path.join(sys_root, "block")
        # Whole disks only, as the native source: names listed in /sys/block (where there is one).
        keep = ((lambda d: os.path.exists(os.path.join(block, d.replace("/", "!"))))
                if os.path.isdir(block) else (lambda d: True))
        return self._devices("disk", lambda: psutil.disk_io_counters(perdisk=True, nowrap=True),
                             keep, _Counters(DISK_FIELDS, DISK_RATES), _disk_values)

    def _net(self):
        return self._devices("net", lambda: psutil.net_io_counters(pernic=True, nowrap=True),
                             lambda n: True, _Counters(NET_FIELDS, NET_RATES), _net_values)

    @staticmethod
    def _devices(kind: str, read_all, keep, counters: "_Counters", values):
        """Per-device counters in the kernel's listing order (psutil keeps it), as the native source."""
        devices = [d for d in (read_all() or {}) if keep(d)]
        fields = counters.fields + tuple(r + "_per_second" for r in counters.rates)
        names = [f"{kind}/{d}/{f}" for d in devices for f in fields]

        def read(t: float) -> List[float]:
            now = read_all() or {}
            out: List[float] = []
            for d in devices:
                out += counters.row(d, values(now[d]) if d in now else None, t)
            return out
        return names, read

    def _load(self):
        def read(_t: float) -> List[float]:
            one, five, fifteen = psutil.getloadavg()
            return [one, five, fifteen, NAN, NAN]
        return ["load/1m", "load/5m", "load/15m", "load/procs_running", "load/procs_total"], read

    def _process(self, pid: Optional[int]):
        proc = psutil.Process(pid)
        state = {"t": None, "cpu": None}

        def read(t: float) -> List[float]:
            with proc.oneshot():
                mem, ct, threads = proc.memory_info(), proc.cpu_times(), proc.num_threads()
            cpu = ct.user + ct.system
            pct = NAN
            if state["t"] is not None and t > state["t"]:
                pct = 100.0 * max(0.0, cpu - state["cpu"]) / (t - state["t"])
            state["t"], state["cpu"] = t, cpu
            return [float(mem.rss), float(mem.vms), pct, cpu, float(threads)]
        return ["process/rss_bytes", "process/vms_bytes", "process/cpu_percent",
                "process/cpu_seconds_total", "process/num_threads"], read

    def _gpu(self):
        from .gpu_pynvml import open_gpu
        self._gpu_state, names, read = open_gpu(self._gpu_state)
        return list(names), read

    # -- sampling -----------------------------------------------------------------------------
    def _row(self, readers) -> np.ndarray:
        t = time.monotonic()
        out: List[float] = []
        for name, names, fn in readers:
            try:
                out += fn(t)
            except Exception as exc:  # noqa: BLE001 - a failing source reads NaN, others go on
                self.errors[name] = f"psutil: {type(exc).__name__}: {exc}"
                out += [NAN] * len(names)
        return np.asarray(out, dtype=np.float64)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="sysprof-psutil", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        interval_ns = int(self.interval * 1e9)
        self._row(self._readers)  # re-prime
        next_ns = time.monotonic_ns() + interval_ns
        while not self._stop.wait(max(0.0, (next_ns - time.monotonic_ns()) / 1e9)):
            t0 = time.monotonic_ns()
            wall = time.time_ns()
            row = self._row(self._readers)
            with self._lock:
                if self._head - self._tail >= self._capacity:
                    self._dropped += 1
                else:
                    i = self._head % self._capacity
                    self._ts[i], self._values[i] = wall, row
                    self._head += 1
            t1 = time.monotonic_ns()
            self._costs.append(t1 - t0)
            if len(self._costs) > 100000:
                del self._costs[:50000]
            next_ns += interval_ns
            if t1 >= next_ns:
                skipped = (t1 - next_ns) // interval_ns + 1
                self._missed += skipped
                next_ns += skipped * interval_ns

    def sample(self) -> Tuple[int, np.ndarray]:
        wall = time.time_ns()
        return wall, self._row(self._sync)

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
        costs = np.asarray(self._costs[-10000:], dtype=np.float64)
        return {"taken": head + dropped, "dropped": dropped, "drained": tail,
                "buffered": head - tail, "missed_deadlines": self._missed,
                "sample_ns_mean": float(costs.mean()) if costs.size else NAN,
                "sample_ns_p99": float(np.percentile(costs, 99)) if costs.size else NAN,
                "sample_ns_max": float(costs.max()) if costs.size else NAN}
