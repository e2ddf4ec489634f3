"""GPU channels through pynvml (``pip install sysprof[gpu]``) for the psutil backend: the entry point,
:func:`open_gpu`, and the poller thread that owns every pynvml call.

Mirrors the native NVML source (csrc/gpu/): same channels, units, rules and metric table. The modules:
nvml_library.py (which library is loaded: :func:`library_path`, ``SYSPROF_NVML_LIBRARY``; the return
codes), nvml_table.py (the lookups over the GPU metric table, sysprof/sampling/gpu_metrics.py), nvml_query.py
(the NVML state and the per-device reading: one "call, classify, remember" path), and this one.

Isolation, as the native source: every pynvml call (nvmlInit, discovery, the reads, nvmlShutdown) runs
on one daemon thread (``_Poller``); the psutil backend's thread only takes the latest reading and never
waits on NVML (ctypes releases the GIL during a call). Opening waits at most ``OPEN_WAIT_S`` for the
device layout; a reading older than the interval + ``LATE_S`` reads NaN; a call in flight longer than
``LATE_S`` is named in errors["gpu"], and its return once it comes back.
"""
from __future__ import annotations

import math
import threading
import time
import weakref
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from sysprof import forks

from .nvml_events import XidWaiter
from .nvml_samples import DriverSampleReader
from .nvml_library import library_path, probe_library
from .nvml_query import Abandoned, GpuReader, NvmlState
from ..gpu_metrics import METRICS
from .nvml_table import CHANNELS

__all__ = ["open_gpu", "library_path", "probe_library", "CHANNELS", "METRICS", "LATE_S", "OPEN_WAIT_S",
           "SYNC_WAIT_S"]

NAN = math.nan
LATE_S = 0.25  # a call in flight longer is blocked; a reading older than the interval + this reads NaN
OPEN_WAIT_S = 1.5  # opening waits this long for the device layout
SYNC_WAIT_S = 2.0  # a synchronous read waits at most this long for a fresh reading


class _Poller:
    """Owns every pynvml call, on one daemon thread: discovery, a reading each time a reader asked
    for one since the previous reading began, and nvmlShutdown once no reader is left. Readers take
    the latest reading; only a synchronous one waits for a fresh reading, and never on a blocked call."""

    def __init__(self, gpus=None) -> None:
        self.gpus = gpus  # (entries, from CUDA_VISIBLE_DEVICES) of sampling.gpus.selection(), or None: all
        self.cond = threading.Condition()  # never held during a pynvml call
        self.state: Optional[NvmlState] = None
        self.phase = "loading"  # loading, layout, ready, failed
        self.failure = ""
        self.call: Optional[Tuple[str, float]] = None  # (label, time.monotonic() at entry) of the call in flight
        self.latest: Tuple[float, List[float]] = (-math.inf, [])  # (time the reading began, values)
        self.wanted = -math.inf  # latest time a reader asked for a reading
        self.last_start = -math.inf
        self.quit = False
        self.clients = 0
        self.generation = forks.generation()  # in a fork()ed child the thread is not there, and cond may be held
        self._report: Optional[Callable[[str], None]] = None
        threading.Thread(target=self._main, name="sysprof-pynvml", daemon=True).start()

    # -- as the psutil backend sees it (the former NvmlState interface) ---------------------------
    @property
    def devices(self) -> List[Dict[str, object]]:
        return list(self.state.devices) if self.state is not None else []

    @property
    def report(self) -> Optional[Callable[[str], None]]:
        return self._report

    @report.setter
    def report(self, fn: Optional[Callable[[str], None]]) -> None:
        self._report = fn
        if self.state is not None:
            self.state.report = fn

    def flush(self) -> None:
        if self.state is not None:
            self.state.flush()

    # -- the poller thread -------------------------------------------------------------------------
    def timed(self, what: str, dev: int, fn, *args):
        if self.quit:
            raise Abandoned()
        label = f"gpu/{dev}: {what}" if dev >= 0 else what
        t0 = time.monotonic()
        self.call = (label, t0)
        try:
            return fn(*args)
        finally:
            self.call = None
            took = time.monotonic() - t0
            if took > LATE_S and self._report is not None:
                notes = "; ".join(self.state.notes) if self.state is not None else ""
                self._report(f"{label} returned after {math.floor(took * 10) / 10:.1f} s" + (f"; {notes}" if notes else ""))

    def _set(self, phase: str, failure: str = "") -> None:
        with self.cond:
            if self.phase == "loading" or phase != "failed":
                self.phase, self.failure = phase, failure
            self.cond.notify_all()

    def _main(self) -> None:
        try:
            state = NvmlState(self.timed, self.gpus)
            state.report = self._report
            self.state = state
            self._set("layout")
            state.describe()
            state.events = XidWaiter(state)
            state.samples = DriverSampleReader(state)  # the driver's buffered samples (nvml_samples.py)
            reader = GpuReader(state)
            t = time.monotonic()
            self.latest = (t, reader.read(t))  # baselines for the rates
            self._set("ready")
        except Abandoned:
            self._finish()
            return
        except Exception as exc:  # noqa: BLE001 - reported by open_gpu, or as a note once laid out
            if self.phase == "loading":
                self._set("failed", str(exc) if isinstance(exc, RuntimeError) else f"{type(exc).__name__}: {exc}")
            elif self.state is not None:
                self.state.note(f"gpu reader stopped: {type(exc).__name__}: {exc}")
            self._finish()
            return
        try:
            while True:
                with self.cond:
                    while not self.quit and self.wanted <= self.last_start:
                        self.cond.wait()
                    if self.quit:
                        break
                    t = self.last_start = time.monotonic()
                values = reader.read(t)
                with self.cond:
                    self.latest = (t, values)
                    self.cond.notify_all()
                state.samples.read(t)  # after the reading is published: never delays it
        except Abandoned:
            pass
        except Exception as exc:  # noqa: BLE001 - the channels read NaN from now on
            state.note(f"gpu reader stopped: {type(exc).__name__}: {exc}")
        self._finish()

    def _finish(self) -> None:
        if self.state is not None:  # nvmlShutdown here: no other pynvml call of ours can be in flight
            self.state.close_gpm()
            events = self.state.events  # else the XID thread shuts down once its overrunning wait returns
            if events is None or events.close(self.state._finalizer):
                self.state._finalizer()
        with self.cond:
            self.phase = "failed" if self.phase == "loading" else self.phase
            self.quit = True
            self.cond.notify_all()

    # -- any thread --------------------------------------------------------------------------------
    def blocked(self, now: float) -> Optional[str]:
        """'<call> blocked for <s> s' while a call has been in flight longer than LATE_S."""
        call = self.call
        if call is None or now - call[1] <= LATE_S:
            return None
        return f"{call[0]} blocked for {math.floor((now - call[1]) * 10) / 10:.1f} s"

    def ask(self, t: float) -> None:
        with self.cond:
            if t > self.wanted:
                self.wanted = t
            self.cond.notify_all()

    def wait_fresh(self, t: float) -> None:
        """Waits for a reading begun at or after t: at most SYNC_WAIT_S, and not while a call is blocked."""
        self.ask(t)
        with self.cond:
            while self.latest[0] < t and not self.quit and self.phase != "failed":
                now = time.monotonic()
                if now - t >= SYNC_WAIT_S or self.blocked(now) is not None:
                    break
                self.cond.wait(0.01)

    def release(self) -> None:
        if forks.generation() != self.generation:
            return
        with self.cond:
            self.clients -= 1
            if self.clients <= 0:
                self.quit = True
                self.cond.notify_all()


class _Client:
    """Held by a read function; when the last is collected the poller shuts NVML down and ends."""

    def __init__(self, poller: _Poller) -> None:
        with poller.cond:
            poller.clients += 1
        weakref.finalize(self, poller.release)


def _reader(poller: _Poller, width: int, sync: bool) -> Callable[[float], List[float]]:
    client = _Client(poller)
    prev = [None]
    shown = [None]

    def read(t: float) -> List[float]:
        _ = client
        if forks.generation() != poller.generation:  # inherited through fork(): the poller is the parent's
            return [NAN] * width
        if prev[0] is None:
            pass  # the backend's priming call, right after opening: the poller has just primed
        elif sync:
            t = time.monotonic()
            poller.wait_fresh(t)
        else:
            poller.ask(t)
        late = LATE_S + (t - prev[0] if prev[0] is not None and not sync else 0.0)
        prev[0] = t
        begun, values = poller.latest
        msg = poller.blocked(time.monotonic())
        if msg is None:
            shown[0] = None
        elif msg != shown[0] and poller.report is not None:
            shown[0] = msg
            poller.report(f"{msg}; gpu readings older than {round(late * 1000)} ms read NaN")
        if t - begun > late or len(values) != width:
            return [NAN] * width
        return list(values)
    return read


def open_gpu(state: Optional[_Poller], gpus=None) -> Tuple[_Poller, Sequence[str], Callable[[float], List[float]]]:
    """(poller, channel names, read function) for the psutil backend; raises RuntimeError with the
    reason when NVML is unusable here or its discovery is blocked. The first call (state None) gives
    the sampling thread's reader, which takes the latest reading; a call with the poller of a previous
    one gives a synchronous reader (sample()) that waits, bounded, for a fresh reading. ``gpus``: the GPUs
    read (``sampling.gpus.selection()``; None: all)."""
    sync = state is not None
    poller = state if state is not None else _Poller(gpus)
    with poller.cond:  # the first opening waits (bounded) for the layout; a later one finds it
        if sync and poller.phase == "loading":
            raise RuntimeError("gpu source was not opened")
        deadline = time.monotonic() + (0.0 if sync else OPEN_WAIT_S)
        while poller.phase not in ("ready", "failed") and time.monotonic() < deadline:
            poller.cond.wait(max(0.0, deadline - time.monotonic()))
        phase = poller.phase
    if phase == "failed":
        raise RuntimeError(poller.failure)
    if phase == "loading":
        msg = poller.blocked(time.monotonic()) or "GPU discovery did not finish within 1.5 s"
        with poller.cond:
            poller.quit = True
            poller.cond.notify_all()
        raise RuntimeError(f"{msg} at open; gpu source left out (its thread ends when the call returns)")
    names = poller.state.channels()
    return poller, names, _reader(poller, len(names), sync)
