"""The recorded command: starting it, passing signals on to it, ``--duration``'s SIGTERM and SIGKILL, its exit
status."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

from .common import CLIError


class _Signals:
    """Installs handlers for SIGINT/SIGTERM/SIGHUP/SIGQUIT that forward to the child and record the stop.

    The first signal is passed on as it is. A SIGINT/SIGQUIT/SIGHUP that the terminal sends reaches the
    whole foreground process group, child included, so it is not sent a second time when sysprof and its
    child are that group; anything else (``kill``, a scheduler's SIGTERM, sysprof started in the
    background) is forwarded. For a command that ignores it, the second signal sends it SIGTERM and the
    third SIGKILL. ``sent`` names every signal sysprof sent the command (these and ``--duration``'s)."""

    TTY_SIGNALS = (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP)

    def __init__(self):
        self.child_pid = None
        self.received = []
        self.sent = []
        self.old = {}
        self.wakeup_r = self.wakeup_w = None
        self.old_wakeup = None

    def install(self):
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            try:
                if signal.getsignal(sig) == signal.SIG_IGN and sig != signal.SIGTERM:
                    continue  # started with it ignored (nohup, background job): keep it so, like a shell
                self.old[sig] = signal.signal(sig, self._handler)
            except (ValueError, OSError):  # not the main thread
                pass
        try:
            r, w = os.pipe()
            os.set_blocking(r, False)
            os.set_blocking(w, False)
            self.old_wakeup = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
            self.wakeup_r, self.wakeup_w = r, w
        except (ValueError, OSError):
            pass

    def restore(self):
        for sig, old in self.old.items():
            try:
                signal.signal(sig, old)
            except (ValueError, OSError, TypeError):
                pass
        self.old.clear()
        if self.wakeup_w is not None:
            try:
                signal.set_wakeup_fd(self.old_wakeup if self.old_wakeup is not None else -1)
            except (ValueError, OSError):
                pass
            os.close(self.wakeup_r)
            os.close(self.wakeup_w)
            self.wakeup_r = self.wakeup_w = None

    def drain_wakeup(self):
        if self.wakeup_r is not None:
            try:
                while os.read(self.wakeup_r, 512):
                    pass
            except (BlockingIOError, OSError):
                pass

    @staticmethod
    def _terminal_sent_it_to_child_too() -> bool:
        try:
            fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
        except OSError:
            return False
        try:
            return os.tcgetpgrp(fd) == os.getpgrp()
        except OSError:
            return False
        finally:
            os.close(fd)

    def send(self, signum) -> None:
        """Send ``signum`` to the command (if it is still there) and note it in ``sent``."""
        pid = self.child_pid
        if pid is None:
            return
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            return
        self.sent.append(signal.Signals(signum).name)

    def _handler(self, signum, frame):
        self.received.append(signum)
        n = len(self.received)
        if n >= 3:
            self.send(signal.SIGKILL)
        elif n == 2:
            self.send(signal.SIGTERM)
        elif not (signum in self.TTY_SIGNALS and self._terminal_sent_it_to_child_too()):
            self.send(signum)


class _Child:
    """The recorded command: a Popen plus a pidfd to wait on (when the kernel has pidfd_open)."""

    def __init__(self, argv):
        self.popen = subprocess.Popen(argv, restore_signals=True)
        self.pid = self.popen.pid
        self.pidfd = None
        if hasattr(os, "pidfd_open"):
            try:
                self.pidfd = os.pidfd_open(self.pid)
            except OSError:
                self.pidfd = None

    def poll(self):
        return self.popen.poll()

    def close(self):
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


def _exit_status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def _resolve_command(argv):
    exe = argv[0]
    if os.sep in exe:
        if not os.path.exists(exe):
            raise CLIError(f"command not found: {exe}", status=127)
        if os.path.isdir(exe) or not os.access(exe, os.X_OK):
            raise CLIError(f"permission denied: {exe}", status=126)
        return exe
    found = shutil.which(exe)
    if found is None:
        raise CLIError(f"command not found: {exe}", status=127)
    return found


class _Timeout:
    """``--duration`` with a command, like timeout(1): at the end SIGTERM, ``--kill-after`` later SIGKILL.

    ``at`` is the monotonic time of the next step (None: nothing more to do); ``step()`` says which
    signal to send now and moves on."""

    def __init__(self, duration, kill_after):
        self.at = time.monotonic() + duration if duration else None
        self.kill_after = kill_after
        self.reached = False  # the duration is over

    def remaining(self):
        return None if self.at is None else max(0.0, self.at - time.monotonic())

    def step(self):
        if not self.reached:
            self.reached = True
            self.at = time.monotonic() + self.kill_after
            return signal.SIGTERM
        self.at = None
        return signal.SIGKILL


def _wait_child(child, signals, timeout) -> int:
    """Wait for the command to exit, signalling it as ``timeout`` says (--duration, --kill-after)."""
    while True:
        try:
            return child.popen.wait(timeout=timeout.remaining())
        except subprocess.TimeoutExpired:
            signals.send(timeout.step())
        except KeyboardInterrupt:  # pragma: no cover - handlers are restored only after this
            continue


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
        return state not in (b"Z", b"X")
    except (OSError, IndexError):
        return False
