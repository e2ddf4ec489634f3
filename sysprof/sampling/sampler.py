"""The public sampler: one API over two backends.

``native``: the C++ extension ``sysprof._native`` reads /proc on its own thread into a lock-free ring,
never taking the GIL. ``psutil``: a Python thread reading psutil, for systems without /proc or without
the extension. Both yield the same channels, names and units; this module is the only place that
chooses between them.
"""
from __future__ import annotations

import functools
import math
import os
import warnings
from collections.abc import Mapping
from typing import Dict, List, Optional, Tuple

import numpy as np

from .. import forks
from .members import is_tenure, tenures
from .registry import SOURCES
from .rows import Batch, Row

try:
    from .. import _native
    _NATIVE_ERROR: Optional[str] = None
except ImportError as exc:  # extension not built, or built for another platform
    _native = None
    _NATIVE_ERROR = f"{type(exc).__name__}: {exc}"

__all__ = ["Batch", "Row", "Sampler", "native_available"]

BACKENDS = ("auto", "native", "psutil")
MIN_INTERVAL_S = 1e-6  # below this the thread would only spin and count missed deadlines
MAX_INTERVAL_S = 86400.0  # one day
MAX_CAPACITY = 1 << 31  # rows
#: Sampler(capacity=None): the ring holds DEFAULT_RING_SECONDS of rows at the interval, or DEFAULT_RING_BYTES of
#: them where that is fewer (a wide row: many CPUs, disks, processes), within [DEFAULT_MIN_ROWS, DEFAULT_MAX_ROWS]
DEFAULT_RING_SECONDS = 4.0
DEFAULT_RING_BYTES = 4 << 20
DEFAULT_MIN_ROWS = 64
DEFAULT_MAX_ROWS = 65536


def ring_capacity(interval: float, seconds: float, min_rows: int, max_rows: int) -> int:
    """Ring rows that hold ``seconds`` of samples at ``interval`` (the time a reader may leave between two
    drains, with margin), within ``[min_rows, max_rows]``: the one sizing rule of the CLI and SystemProfiler."""
    return int(min(max_rows, max(min_rows, math.ceil(seconds / interval))))


def native_available() -> Tuple[bool, str]:
    """Whether the native backend can be used here, and why not (``(True, "")`` when it can)."""
    if _native is None:
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the sysprof package
        if os.path.exists(os.path.join(os.path.dirname(here), "pyproject.toml")):
            return False, (f"sysprof was imported from the source checkout {here}, which has no compiled "
                           "extension: run from another directory, or use the installed `sysprof` command")
        return False, f"extension sysprof._native did not import ({_NATIVE_ERROR})"
    if not os.path.exists("/proc/stat"):
        return False, "no /proc/stat on this system"
    return True, ""


_warned_fallback = False

_INHERITED = ("this Sampler was made before fork() and its thread is in the parent process; "
              "make a new Sampler in this process")


def _warn_fallback(why: str) -> None:
    """Says once per process that sysprof runs on psutil, and why (a missing build on Linux is a bug)."""
    global _warned_fallback
    if not _warned_fallback:
        _warned_fallback = True
        warnings.warn(f"sysprof: using the psutil backend: {why}", RuntimeWarning, stacklevel=3)


def _keywords() -> Dict[str, object]:
    """Sampler's source keywords, in registry order: each source (default ``SourceSpec.default``), then its
    options (a switch: off; a number: None, its ``OptionSpec.default``)."""
    out: Dict[str, object] = {}
    for spec in SOURCES.values():
        out[spec.name] = spec.default
        for opt in spec.options:
            out[opt.name] = False if opt.is_switch else None
    return out


SOURCE_KEYWORDS: Dict[str, object] = _keywords()
_OPTION_OF = {opt.name: spec.name for spec in SOURCES.values() for opt in spec.options}
_NUMBER_OPTIONS = {opt.name: opt for spec in SOURCES.values() for opt in spec.options if not opt.is_switch}


def _switch(name: str, v: object) -> bool:
    """A source's or switch's keyword: True or False (a numpy bool too); anything else is a ValueError, so that
    ``cpu="no"`` or ``cpu=[0]`` does not turn the source on by being truthy."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    raise ValueError(f"{name} must be True or False, got {v!r}")


def _flags(sources: Mapping[str, object]) -> Dict[str, object]:
    """Every keyword's value: a bool per source and switch, a validated int per number option (ValueError)."""
    return {k: _NUMBER_OPTIONS[k].value(sources.get(k)) if k in _NUMBER_OPTIONS else _switch(k, sources.get(k, default))
            for k, default in SOURCE_KEYWORDS.items()}


def _native_options(flags: Mapping[str, object]):
    """The options of the sources switched on, as the native Config takes them: a switch's name, ``name=N``."""
    return [o if o not in _NUMBER_OPTIONS else f"{o}={flags[o]}" for o, src in _OPTION_OF.items()
            if flags[o] is not False and flags[src]]


def _or_list(words: List[str]) -> str:
    return ", ".join(words[:-1]) + " or " + words[-1] if len(words) > 1 else "".join(words)


def _periods(interval: float, intervals: Optional[Mapping[str, float]], flags: Dict[str, bool]) -> Dict[str, int]:
    """Deadlines between two reads of each source switched on: ``intervals[name] / interval`` rounded to the
    nearest whole number (half up), 1 for a source not named. Raises ValueError as ``Sampler`` documents."""
    if intervals is None:
        intervals = {}
    if not isinstance(intervals, Mapping):
        raise ValueError(f"intervals must be a mapping of source name to seconds, got {intervals!r}")
    for name, value in intervals.items():
        if name not in SOURCES:
            raise ValueError(f"intervals: unknown source {name!r} (registered: {', '.join(SOURCES)})")
        if not flags[name]:
            raise ValueError(f"intervals: source {name!r} is not sampled; switch it on ({name}=True) or leave it out")
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or not interval * (1 - 1e-9) <= value <= MAX_INTERVAL_S):
            raise ValueError(f"intervals[{name!r}] must be a number of seconds in [interval = {interval:g}, "
                             f"{MAX_INTERVAL_S:g}], got {value!r}")
    return {name: max(1, int(math.floor(intervals[name] / interval + 0.5))) if name in intervals else 1
            for name in SOURCES if flags[name]}


def _sources_doc() -> str:
    lines = []
    for spec in SOURCES.values():
        extra = [] if spec.portable else ["native backend only"]
        if spec.follows_pid:
            extra.append("follows pid")
        note = f" ({'; '.join(extra)})" if extra else ""
        lines.append(f"        {spec.name}={spec.default}: {spec.help}, from {spec.file}{note}.")
        for opt in spec.options:
            lines.append(f"        {opt.name}={opt.default if not opt.is_switch else False}: {opt.help} (with "
                         f"{spec.name}" + (f"; {opt.lo}-{opt.hi}" if not opt.is_switch else "") + ").")
    return "\n".join(lines)


class Sampler:
    """Samples system metrics every ``interval`` seconds on a background thread into a ring buffer.

    Args:
        interval: seconds between samples (> 0). Deadlines are absolute; a missed deadline is
            skipped and counted in ``stats["missed_deadlines"]``.
        capacity: ring rows (>= 2). When full, new rows are dropped and counted, never blocking. None (the
            default): about 4 s of rows at ``interval``, at most 4 MiB of them (so at 1 kHz a wide host set
            holds ~2.5 s), at least 64 rows: drain at least every second or so, or pass a capacity. The
            rows chosen are in ``self.capacity``. A ring of up to 16 MiB is resident from the start (written
            once, so that the sampling thread never takes a page fault); a larger one as it fills.
        backend: ``"auto"`` (native where available), ``"native"`` or ``"psutil"``.
        proc_root, sys_root: where /proc and /sys are mounted (fixtures, containers).
        pid: process followed by the sources that follow a pid ({follows}); None for this process.
        gpu_interval: seconds between two reads of the GPUs, an alias of ``intervals["gpu"]``; by default 10 ms
            (what NVML's fastest metrics resolve, sysprof/sampling/gpu_interval.py) or ``interval`` if longer.
        intervals: seconds between two reads of a source, by name (``{{"cpu": 0.01, "gpu": 0.02}}``); a source
            not named is read every ``interval``. Each is at least ``interval`` and is rounded to the nearest
            whole number of intervals; ``self.intervals`` holds the result for every source switched on. A row
            still comes every ``interval``: a source not due repeats its previous values (copied from the
            previous row; NaN stays NaN), which a changes-only trace stores for free. A source of k intervals
            is read at the first deadline at or after each multiple of k since ``start()`` (a missed deadline
            delays that read to the next row, it never skips it); the first row after ``start()`` and the
            row at ``stop()`` read every source, and so does ``sample()``. Its rates and percents span the
            time between its own reads. ``stats["reads"]`` counts the thread's reads of each source.
        devices: which disks and network interfaces are sampled: globs over their names, ``!GLOB`` to leave
            some out, ``disk/GLOB`` / ``net/GLOB`` for one source (``["disk/nvme*", "!net/docker*"]``). None:
            all but loop devices, RAM disks, zram and ``lo``, which a glob matching them brings back (``["*"]``:
            every device). The rule is :mod:`sysprof.sampling.devices`'; ``self.device_filter`` holds it. (The
            ``devices`` attribute lists the GPUs found.)
        gpus: which GPUs the gpu source reads, in this order: NVML indices, ``GPU-`` UUIDs (or prefixes),
            ``MIG-`` UUIDs (their parent GPU) or PCI bus ids; ``"all"``: every GPU. None: those
            ``CUDA_VISIBLE_DEVICES`` makes visible, in CUDA's order, when it is set, else every GPU. The rule is
            :mod:`sysprof.sampling.gpus`'.
        **sources: one boolean keyword per source and per source switch, an int per number option, from the registry
            (``sysprof.sampling.registry.SOURCES``; channels, units and fields are listed there and in
            docs/reference.md):

{sources}

    Raises:
        TypeError: a keyword that is neither an argument above nor a source or option.
        ValueError: naming the argument, for an interval outside [1 µs, 1 day], a capacity outside
            [2, 2**31] or too large for memory, an unknown backend, ``backend="native"`` where it is
            unavailable, a pid without a source that follows it, or a custom proc_root with psutil; for
            ``intervals``: a name that is not a registered source (the message lists them), a source not
            switched on, or a value below ``interval`` or above 1 day; ``devices`` that is not a list of non-empty
            glob strings (or has ``disk/`` or ``net/`` with no glob after it); a number option outside its
            range (``process_tree_slots``: 0-64); ``gpus`` entries that are no GPU index, UUID or PCI bus id.

    A source that cannot be read here has no channels and an entry in ``errors``. All channels are
    float64 in Prometheus base units (bytes, seconds, percent); see docs/reference.md.

    Which read to use: ``drain()`` for history (every row since the last drain, oldest first);
    ``latest()`` for now (the newest row the running thread took, a copy without a syscall, well under
    a microsecond, leaving the ring to ``drain()``); ``wait_next()`` to block until the next row;
    ``sample()`` for a one-off read of every file on the calling thread, without the thread.
    """

    __doc__ = __doc__.format(follows=", ".join(n for n, s in SOURCES.items() if s.follows_pid), sources=_sources_doc())

    def __init__(self, interval: float = 0.001, *, capacity: Optional[int] = None, backend: str = "auto",
                 proc_root: str = "/proc", sys_root: str = "/sys", pid: Optional[int] = None,
                 intervals: Optional[Mapping[str, float]] = None, devices: Optional[List[str]] = None,
                 gpu_interval: Optional[float] = None, gpus: Optional[List[object]] = None,
                 **sources: bool) -> None:
        from .devices import DeviceFilter
        from .gpu_interval import with_gpu_interval
        from .gpus import native_options as gpu_options, selection as gpu_selection

        for key in sources:
            if key not in SOURCE_KEYWORDS:
                raise TypeError(f"{type(self).__qualname__}.__init__() got an unexpected keyword argument {key!r}")
        flags = _flags(sources)
        if (isinstance(interval, bool) or not isinstance(interval, (int, float))
                or not MIN_INTERVAL_S <= interval <= MAX_INTERVAL_S):
            raise ValueError(f"interval must be a number of seconds in [{MIN_INTERVAL_S:g}, {MAX_INTERVAL_S:g}], "
                             f"got {interval!r}")
        if capacity is not None and (isinstance(capacity, bool) or not isinstance(capacity, int)
                                     or not 2 <= capacity <= MAX_CAPACITY):
            raise ValueError(f"capacity must be None or an integer in [2, {MAX_CAPACITY}], got {capacity!r}")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if pid is not None and (isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0):
            raise ValueError(f"pid must be a positive integer or None, got {pid!r}")
        for name, root in (("proc_root", proc_root), ("sys_root", sys_root)):
            if not isinstance(root, str) or not root or "\0" in root:
                raise ValueError(f"{name} must be a non-empty path without NUL bytes, got {root!r}")
        intervals = with_gpu_interval(float(interval), intervals, gpu_interval, flags.get("gpu", False))
        periods = _periods(float(interval), intervals, flags)
        self.device_filter = DeviceFilter(devices)
        gpu_sel = gpu_selection(gpus)  # ValueError for a malformed entry
        followers = [n for n, spec in SOURCES.items() if spec.follows_pid]
        if pid is not None and not any(flags[n] for n in followers):
            raise ValueError(f"pid is only read by {_or_list([n + '=True' for n in followers])}; "
                             "enable one of them")
        ok, why = native_available()
        if proc_root != "/proc" and _native is not None:
            ok, why = True, ""  # a fixture tree needs no live /proc
        if backend == "native" and not ok:
            raise ValueError(f"backend='native' is unavailable: {why}")
        self.backend = "native" if backend == "native" or (backend == "auto" and ok) else "psutil"
        if backend == "auto" and not ok:
            _warn_fallback(why)
        self.interval = float(interval)
        self.intervals: Dict[str, float] = {name: k * self.interval for name, k in periods.items()}
        max_ring_bytes = 0
        if capacity is None:
            capacity = ring_capacity(self.interval, DEFAULT_RING_SECONDS, DEFAULT_MIN_ROWS, DEFAULT_MAX_ROWS)
            max_ring_bytes = DEFAULT_RING_BYTES
        self._generation = forks.generation()  # a later one: inherited (the extension counts with pthread_atfork)
        if self.backend == "native":
            on = [n for n in SOURCES if flags[n]]  # registry order is row order
            options = _native_options(flags)
            options += self.device_filter.native_options()
            options += gpu_options(gpus) if flags.get("gpu") else []
            interval_ns = max(1, int(round(self.interval * 1e9)))
            try:
                self._impl = _native.NativeSampler(
                    interval_ns=interval_ns, capacity=capacity, sources=on,
                    options=options, pid=-1 if pid is None else pid, proc_root=proc_root, sys_root=sys_root,
                    intervals_ns={n: k * interval_ns for n, k in periods.items() if k > 1},
                    max_ring_bytes=max_ring_bytes)
            except MemoryError:
                raise ValueError(f"capacity {capacity} rows do not fit in memory; each row holds 8 bytes "
                                 "per channel plus 8") from None
        else:
            if proc_root != "/proc":
                raise ValueError("proc_root other than '/proc' needs the native backend (psutil reads the "
                                 f"live system), which is unavailable here: {why or 'backend=psutil was asked'}")
            from .portable.host import PsutilSampler
            self._impl = PsutilSampler(interval=self.interval, capacity=capacity, pid=pid,
                                       sys_root=sys_root, periods=periods, max_ring_bytes=max_ring_bytes,
                                       device_filter=self.device_filter, gpus=gpu_sel, **flags)
        self.channels: Tuple[str, ...] = tuple(self._impl.channels)
        self.capacity: int = int(getattr(self._impl, "capacity", capacity))  # rows of the ring

    @property
    def inherited(self) -> bool:
        """True in a process forked after this Sampler was made: there it is not running, ``stop()`` and
        ``del`` do nothing, ``drain()`` returns no rows (they are the parent's) and ``start()`` and
        ``sample()`` raise RuntimeError. Make a new Sampler in the child instead."""
        return self._generation != forks.generation()

    @property
    def errors(self) -> Dict[str, str]:
        """Source name (a key of ``registry.SOURCES``, or "sampler") -> latest problem.

        A source that could not be opened has no channels; one failing later reads NaN for that row.
        """
        if self.inherited:
            return {"sampler": "inherited through fork(): not running in this process"}
        return dict(self._impl.errors)

    @property
    def devices(self) -> List[Dict[str, object]]:
        """Discovered GPUs (``gpu=True``), in channel order: dicts with ``index`` (int, the NVML
        index used in ``gpu/<index>/...``), ``name``, ``uuid`` and ``pci_bus_id`` (str); ``cuda_index`` (int,
        its ``cuda:N``) when ``CUDA_VISIBLE_DEVICES`` chose them; ``mig_instances`` (the MIG instances' UUIDs)
        on a MIG-enabled GPU, whose channels are the whole GPU's."""
        from .gpus import device as gpu_device

        out = []
        for d in getattr(self._impl, "devices", []):
            d = dict(d)
            if is_tenure(d):  # a process_tree member (see members)
                continue
            out.append(gpu_device(d))
        return out

    def drain_gpu_samples(self):
        """The driver's buffered GPU samples since the last call (:func:`sysprof.sampling.gpu_samples.drain`)."""
        from .gpu_samples import drain
        return drain(self)

    @property
    def members(self) -> List[Dict[str, object]]:
        """Who held which ``process_tree`` slot when (``process_tree=True``), read live, oldest first: one dict
        per tenure with ``slot`` (int; -1: summed into the totals only), ``pid`` (int), ``comm`` (str, from
        /proc/<pid>/stat), ``start_ns`` and ``end_ns`` (wall-clock ns, as row timestamps; ``end_ns`` None while
        the member lives); one given a slot later ends its -1 tenure then. The sampling thread's record (not
        ``sample()``'s). Past 4096 tenures the oldest ended ones are dropped, counted in a last ``{"dropped": n}``."""
        return tenures(getattr(self._impl, "devices", []))

    @property
    def running(self) -> bool:
        return not self.inherited and bool(self._impl.running)

    def start(self) -> "Sampler":
        """Starts the sampling thread. Raises RuntimeError if it is already running, or if the Sampler
        was inherited through fork()."""
        if self.inherited:
            raise RuntimeError(_INHERITED)
        if self._impl.running:
            raise RuntimeError("Sampler is already running")
        self._impl.start()
        return self

    def stop(self) -> None:
        """Stops and joins the sampling thread; rows stay buffered for ``drain()``. Idempotent; a no-op
        in a forked child for an inherited Sampler."""
        if not self.inherited:
            self._impl.stop()

    def __enter__(self) -> "Sampler":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def drain(self, max_rows: Optional[int] = None) -> Batch:
        """Removes and returns the buffered rows, oldest first (at most ``max_rows``).

        The copy runs with the GIL released (native backend).
        """
        if max_rows is not None and (isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 0):
            raise ValueError(f"max_rows must be a non-negative integer or None, got {max_rows!r}")
        if self.inherited:
            return Batch(np.zeros(0, dtype=np.int64), np.zeros((0, len(self.channels))), self.channels,
                         self.interval)
        ts, values = self._impl.drain(-1 if max_rows is None else max_rows)
        return Batch(ts, values, self.channels, self.interval)

    def sample(self) -> Dict[str, float]:
        """Reads every channel now, on the calling thread, independently of the sampling thread.

        Rates and percents are relative to the previous ``sample()`` call (or to construction).
        Returns a dict channel -> float.
        """
        if self.inherited:
            raise RuntimeError(_INHERITED)
        _, row = self._impl.sample()
        return dict(zip(self.channels, row.tolist()))

    @functools.cached_property
    def _row_layout(self) -> Tuple[Tuple[str, ...], Dict[str, int]]:
        return self.channels, {c: i for i, c in enumerate(self.channels)}

    @functools.cached_property
    def _latest_reader(self):
        """latest()'s one call: native, a builtin that copies the row into a new Row (no Python code runs)."""
        if self.backend == "native":
            return self._impl.latest_reader(Row, self._row_layout)
        impl, layout = self._impl, self._row_layout

        def read() -> Optional[Row]:
            r = impl.latest()
            return None if r is None else Row(*r, layout)
        return read

    def latest(self) -> Optional[Row]:
        """The newest row the sampling thread took, as a ``Row`` (mapping channel -> float, with ``seq``,
        ``timestamp_ns``, ``array``), or None before its first row.

        For code that wants "now" in a tight loop: the native backend copies the row the thread last
        published (a seqlock, csrc/engine/latest.hpp): no syscall, no lock, no drain, never waiting on the
        thread, and independent of ``drain()`` (the row stays in the ring for it). Until the first
        ``latest()`` or ``wait_next()`` call the thread publishes a row only every 10 ms (and a run's first and
        last rows), so the first call may return a row up to 10 ms (+ one interval) old, with its own ``seq``;
        from then on every row. After ``stop()`` it stays the last row taken. None in a forked child for an inherited
        Sampler (its rows are the parent's), as ``drain()`` returns no rows there.
        """
        return self._latest_reader()  # each backend answers None when inherited: no check on this hot path

    def wait_next(self, timeout: Optional[float] = None, *, after: Optional[int] = None) -> Optional[Row]:
        """Blocks until the thread takes a row newer than the one ``latest()`` returns at the call's
        start (or numbered above ``after``, a ``Row.seq``), and returns the newest row, as ``latest()``.

        Returns at once when such a row is there already. Returns None after ``timeout`` seconds (None:
        no limit), and at once when the Sampler is not running: before ``start()``, when ``stop()`` is
        called (from another thread; the row stop() adds is not waited for) and for an inherited Sampler
        in a forked child. Rows between two calls may be skipped: ``drain()`` has them all. The GIL is
        released while waiting (native: a futex; Ctrl-C is seen within 0.1 s), and the sampling thread
        never waits on a caller.
        """
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or not timeout >= 0):
            raise ValueError(f"timeout must be a non-negative number of seconds or None, got {timeout!r}")
        if after is not None and (isinstance(after, bool) or not isinstance(after, int) or after < 0):
            raise ValueError(f"after must be a non-negative integer (a Row.seq) or None, got {after!r}")
        if self.inherited:
            return None
        r = self._impl.wait_next(-1 if after is None else min(after, 2**63 - 1),
                                 -1.0 if timeout is None else float(timeout))
        return None if r is None else Row(*r, self._row_layout)

    @property
    def stats(self) -> Dict[str, float]:
        """taken, dropped, drained, buffered, missed_deadlines (counts) and the thread's cost per
        sample: sample_ns_mean, sample_ns_p99, sample_ns_max (ns). taken == drained + dropped + buffered.
        reads: source name -> how many times the thread read it (every source that has channels; with
        ``intervals``, fewer than taken for a slower source; ``sample()`` is not counted).
        """
        st = dict(self._impl.stats)
        st["reads"] = dict(st.get("reads", {}))
        return st

    def __repr__(self) -> str:
        return (f"Sampler(backend={self.backend!r}, interval={self.interval}, "
                f"channels={len(self.channels)}, running={self.running})")

    def __del__(self) -> None:
        impl = getattr(self, "_impl", None)
        if impl is not None and not self.inherited:
            impl.stop()
