"""XID events through pynvml's event API, as csrc/gpu/nvml_events.cpp waits for them natively.

The poller thread (nvml.py) opens an :class:`XidWaiter` after discovery: ``nvmlEventSetCreate``, then
``nvmlDeviceRegisterEvents(nvmlEventTypeXidCriticalError)`` per device, each through the poller's timed
calls. A daemon thread of its own then loops on ``nvmlEventSetWait_v2`` with a timeout of ``WAIT_MS``
(ctypes releases the GIL during the wait); each XID adds one to its device's ``xid_total`` and sets its
``xid_last``, which every reading copies (NaN where the device cannot report XIDs). Closing asks the
thread to end and waits at most ``STOP_WAIT_S``; a wait that overruns its timeout is not waited for: the
waiter's thread then frees the set and shuts NVML down itself once its wait returns.
"""
from __future__ import annotations

import ctypes
import math
import threading
import weakref
from typing import Callable, List

from . import nvml_library as lib
from .nvml_table import INDEX

WAIT_MS = 100  # one nvmlEventSetWait_v2's timeout (csrc/gpu/nvml_events.hpp kEventWaitMs)
STOP_WAIT_S = WAIT_MS / 1000 + 0.15  # closing waits this long for the thread (kEventStopWaitNs)
XID_CRITICAL = 0x8  # nvmlEventTypeXidCriticalError
TIMEOUT, UNINITIALIZED = 10, 1
SYMBOLS = ("nvmlEventSetCreate", "nvmlDeviceRegisterEvents", "nvmlEventSetWait_v2", "nvmlEventSetFree")
_TOTAL, _LAST = INDEX["xid_total"], INDEX["xid_last"]


def _address(handle) -> int:
    return ctypes.cast(handle, ctypes.c_void_p).value or 0


class XidWaiter:
    """The XID counts of an NvmlState's devices, kept by a thread that waits for the driver's events."""

    def __init__(self, state) -> None:
        # the thread holds no strong reference to the state: the state's report callback holds the backend,
        # whose readers hold the poller's clients (a running thread holding them would keep the poller alive)
        self._state = weakref.ref(state)
        self.indices = list(state.indices)
        pynvml = self.pynvml = state.pynvml
        n = len(state.handles)
        self.count: List[int] = [0] * n
        self.last: List[int] = [0] * n
        self.registered: List[bool] = [False] * n
        self.set = None
        self.cond = threading.Condition()
        self.quit = self.handed = False
        self.ended = True
        self.on_handover: Callable[[], None] = lambda: None
        missing = next((name for name in SYMBOLS if not self._exported(name)), None)
        if missing is not None:  # an older driver
            return self._refuse_all(missing, lib.FUNCTION_NOT_FOUND)
        try:
            self.set = state.timed("nvmlEventSetCreate", -1, pynvml.nvmlEventSetCreate)
        except pynvml.NVMLError as exc:
            return self._refuse_all("nvmlEventSetCreate", exc.value)
        for d, h in enumerate(state.handles):
            try:
                state.timed("nvmlDeviceRegisterEvents", state.indices[d], pynvml.nvmlDeviceRegisterEvents, h,
                            XID_CRITICAL, self.set)
                self.registered[d] = True
            except pynvml.NVMLError as exc:
                state.note(self._refusal(d, "nvmlDeviceRegisterEvents", exc.value))
        self._by_address = {_address(h): d for d, h in enumerate(state.handles)}
        if any(self.registered):
            self.ended = False
            threading.Thread(target=self._run, name="sysprof-pynvml-xid", daemon=True).start()

    def _exported(self, name: str) -> bool:
        """pynvml has the function (an older one may lack nvmlEventSetWait_v2) and the library exports it."""
        if not hasattr(self.pynvml, name):
            return False
        try:
            self.pynvml._nvmlGetFunctionPointer(name)
            return True
        except Exception:  # noqa: BLE001 - pynvml raises NVMLError_FunctionNotFound
            return False

    def _refusal(self, d: int, what: str, code: int) -> str:
        return f"gpu/{self.indices[d]}: xid_total, xid_last read NaN ({what}: {lib.code_name(self.pynvml, code)})"

    def _refuse_all(self, what: str, code: int) -> None:
        state = self._state()
        for d in range(len(self.registered)):
            state.note(self._refusal(d, what, code))

    def _run(self) -> None:
        pynvml = self.pynvml
        while not self.quit:
            try:
                e = pynvml.nvmlEventSetWait_v2(self.set, WAIT_MS)
            except pynvml.NVMLError as exc:
                if exc.value == TIMEOUT:
                    continue
                if exc.value in lib.PERMANENT or exc.value == UNINITIALIZED:
                    self.registered = [False] * len(self.registered)
                    state = self._state()
                    if state is not None:
                        state.note("gpu: xid_total, xid_last read NaN from now on (nvmlEventSetWait_v2: "
                                   f"{lib.code_name(pynvml, exc.value)})")
                    break
                with self.cond:  # e.g. a lost device: not a busy loop
                    self.cond.wait_for(lambda: self.quit, WAIT_MS / 1000)
                continue
            except Exception:  # noqa: BLE001 - the counts stay as they are
                break
            d = self._by_address.get(_address(e.device))
            if e.eventType & XID_CRITICAL and d is not None and self.registered[d]:
                self.last[d] = int(e.eventData)
                self.count[d] += 1
        with self.cond:
            self.ended = True
            handed = self.handed
            self.cond.notify_all()
        if handed:
            self._free()
            self.on_handover()

    def _free(self) -> None:
        try:
            self.pynvml.nvmlEventSetFree(self.set)
        except Exception:  # noqa: BLE001 - best effort at the end
            pass

    def values(self, d: int, o: List[float]) -> None:
        """Device d's xid_total and xid_last into a reading's slice o (NaN where not registered)."""
        if self.registered[d]:
            o[_LAST], o[_TOTAL] = float(self.last[d]), float(self.count[d])

    def close(self, on_handover: Callable[[], None]) -> bool:
        """Asks the thread to end, waiting at most STOP_WAIT_S. True: it ended and the set is freed.
        False: the thread calls ``on_handover`` (nvmlShutdown) once its wait returns."""
        with self.cond:
            self.quit = True
            self.on_handover = on_handover
            self.cond.notify_all()
            if not self.cond.wait_for(lambda: self.ended, STOP_WAIT_S):
                self.handed = True
                return False
        if self.set is not None:  # the poller's last call but nvmlShutdown: not timed (it may be quitting)
            self._free()
            self.set = None
        return True
