"""The ``sysprof`` command line: record a workload, report on a trace, plot it, inspect the machine.

    sysprof record [-o TRACE] [--interval 1ms] [--cpu] [--per-cpu] [--memory] [--disk] [--net]
                   [--gpu] [--load] [--process] [--process-tree] [--pressure] [--cgroup] [--all] [--duration SECONDS]
                   [--kill-after SECONDS] [--capacity ROWS] [-- COMMAND ARGS...]
    sysprof report TRACE [--json] [--plot FILE.png [--smooth TIME]] [-k PATTERN] [--all]
    sysprof info [--json]
    sysprof repair TRACE
    sysprof bench [ARGS...]          (runs benchmarks/run.py of a source checkout)

Trace format (Chrome trace-event JSON, opens in ui.perfetto.dev and chrome://tracing), written by
``sysprof.trace.chrome.ChromeTraceWriter``:

* ``"ph": "M"`` ``process_name`` events naming the system-counter process (sysprof's own pid) and,
  with ``--process`` or ``--process-tree``, the followed command's pid (``PROGRAM (pid N)``).
* one ``"ph": "i"`` instant event named ``"sysprof start"`` whose args hold the recording metadata
  (``version``, ``command_line``, ``interval_s``, ``backend``, ``channels``, ``errors``, ...); the command line,
  every argument included, is written there and nowhere else (the followed process is named by its program);
* ``"ph": "C"`` counter events, one per channel group and sample row: a channel ``a/b/c`` is written as
  ``{"name": "a/b", "args": {"c": value}}``. A NaN (unknown) or +/-inf value (e.g. a cgroup limit of
  ``max``) is left out of its event (``chrome_trace.counter_args``); an event with no value left is not
  written, except as ``"args": {}`` where a group that had values turns all-unknown, so ``report`` knows
  the old values stopped holding there. ``ts`` is in microseconds since
  the Unix epoch (an integer, or a float with sub-microsecond digits when the interval is below 1 ms);
* a ``"sysprof"`` counter event at each flush with the sampler's running ``taken``/``dropped``/
  ``missed_deadlines``, so a truncated trace still tells how much was lost;
* a final ``"ph": "i"`` event ``"sysprof stop"`` whose args hold the sampler's final ``stats``,
  ``samples_written`` (= taken - dropped), the ``signals`` received, the ``signals_sent`` to the command
  and its ``returncode``.
"""
from __future__ import annotations

import argparse
import errno
import json
import math
import os
import platform
import re
import select
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

from ..trace.tracks import EventBuilder
from ..report import (START_EVENT, STATS_COUNTER, STOP_EVENT, ReportError, TraceData, channel_filter, human_bytes,
                     jsonable, plot_trace, print_table, require_matplotlib, source_available, split_channel,
                     summarize)

PROG = "sysprof"

#: sources switched on by ``record`` when none is named
DEFAULT_SOURCES = ("cpu", "memory", "disk", "net")
#: the sampling interval used when ``--interval`` is not given
DEFAULT_INTERVAL = "10ms"
#: drain the sampler this often (seconds); flush the trace at least every FLUSH_PERIOD seconds
DRAIN_PERIOD = 0.2
FLUSH_PERIOD = 1.0
STATUS_PERIOD = 0.5
#: the sampler's ring holds about RING_SECONDS of samples (it is drained every DRAIN_PERIOD), within these rows
RING_SECONDS = 4.0
MIN_CAPACITY = 1024
MAX_CAPACITY = 65536
#: with --duration and a command: SIGKILL this long after the SIGTERM (--kill-after)
DEFAULT_KILL_AFTER = "5s"



class CLIError(Exception):
    """An error reported as one line ``sysprof: <message>`` and exit status ``status``."""

    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


class _Parser(argparse.ArgumentParser):
    """argparse, but errors are one line (no usage block) and raise instead of exiting."""

    def error(self, message):  # noqa: D401 - argparse API
        raise CLIError(f"{message} (see '{self.prog} --help')", status=2)


# --------------------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------------------

_TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0,
               "m": 60.0, "min": 60.0, "h": 3600.0}
_TIME_RE = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-z\u00b5]*)\s*")


def parse_time(text: str) -> float:
    """Parse ``1ms``, ``500us``, ``0.5s``, ``2`` (seconds), ``1m`` into seconds (> 0)."""
    m = _TIME_RE.fullmatch(str(text).lower())
    if not m or m.group(2) not in ("",) + tuple(_TIME_UNITS):
        raise argparse.ArgumentTypeError(f"invalid time {text!r} (examples: 1ms, 500us, 0.5s, 2)")
    value = float(m.group(1)) * _TIME_UNITS.get(m.group(2), 1.0)
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"time must be > 0, got {text!r}")
    return value


def _version() -> str:
    try:
        import sysprof

        v = getattr(sysprof, "__version__", None)
        if v:
            return str(v)
    except Exception:  # pragma: no cover - the CLI must still say something
        pass
    try:
        from importlib.metadata import version

        return version("sysprof")
    except Exception:
        return "unknown"


def _import_sysprof():
    try:
        import sysprof
        from sysprof.trace.chrome import ChromeTraceWriter, read_trace, repair_trace  # noqa: F401
    except ImportError as e:
        raise CLIError(f"cannot import the sysprof package: {e}") from None
    return sysprof


def _warn(msg: str, quiet: bool = False) -> None:
    if not quiet:
        print(f"{PROG}: warning: {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------------
# record
# --------------------------------------------------------------------------------------------------

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


class _Output:
    """The trace file of ``record``: opened once, before the command starts, never through a symbolic link, and
    locked while recorded.

    The file is created exclusively (O_EXCL) or, with ``force``, the existing one is opened without truncating
    it; O_NOFOLLOW makes the kernel refuse a symbolic link at the name, dangling or not, so nothing is written
    through one (the link is left as it is; directories above may be links). A regular file is then locked
    (``chrome_trace.lock_trace``: flock, close-on-exec so the command never holds it; the kernel drops it when
    sysprof ends, even by SIGKILL, so ``repair`` can then run) and a second recorder fails before its command
    starts. :meth:`truncate` empties an existing file once the command runs; :meth:`writer` hands the descriptor
    to the trace writer."""

    FLAGS = os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC

    def __init__(self, path: str, force: bool):
        self.path = path
        self.created = False  # whether the file is ours to remove when recording cannot start
        self.ident = None     # (st_dev, st_ino) of the file opened
        for _ in range(5):  # retried only when the name changes hands between the open and the lock
            try:
                self.fd = os.open(path, self.FLAGS | os.O_CREAT | os.O_EXCL, 0o666)
                self.created = True
            except FileExistsError:
                if not force:
                    raise CLIError(f"output exists: {path} (use --force to overwrite)") from None
                try:
                    self.fd = os.open(path, self.FLAGS)
                except FileNotFoundError:
                    continue  # removed in between: create it
                except OSError as e:
                    raise self._error(e) from None
            except OSError as e:
                raise self._error(e) from None
            if self._lock():
                return
        raise CLIError(f"cannot write {path}: it was replaced while being opened, again and again")

    def _error(self, e: OSError) -> CLIError:
        if e.errno == errno.ELOOP and os.path.islink(self.path):
            return _symlink_error(self.path)
        if isinstance(e, IsADirectoryError):
            return CLIError(f"output is a directory: {self.path}", status=2)
        return CLIError(f"cannot write {self.path}: {e.strerror or e}")

    def _lock(self) -> bool:
        """Lock a regular file; False (closed) when ``path`` no longer names the file opened."""
        from sysprof.trace.chrome import TraceBusyError, lock_trace

        st = os.fstat(self.fd)
        self.ident = (st.st_dev, st.st_ino)
        if not stat.S_ISREG(st.st_mode):
            return True  # a device such as /dev/null: nothing to lock or truncate
        try:
            lock_trace(self.fd, self.path)
        except TraceBusyError as e:
            self.close()
            who = f"pid {e.pid}" if e.pid else "another process"
            raise CLIError(f"output is in use: {self.path} is locked by {who} (another sysprof record or "
                           f"repair)") from None
        except OSError:
            pass  # a file system without flock: record unlocked, as before
        try:
            now = os.lstat(self.path)
        except OSError:
            now = None
        if now is None or (now.st_dev, now.st_ino) != self.ident:
            self.close()
            return False
        return True

    def truncate(self) -> None:
        if stat.S_ISREG(os.fstat(self.fd).st_mode):
            os.ftruncate(self.fd, 0)

    def writer(self, writer_class):
        fd, self.fd = self.fd, None
        return writer_class(self.path, fd=fd)

    def discard(self) -> None:
        """Recording did not start: remove the file if this run created it (still locked, by this descriptor or
        the writer's), then close this descriptor if not handed on."""
        if self.created and self.ident is not None:
            try:
                now = os.lstat(self.path)
                if (now.st_dev, now.st_ino) == self.ident:
                    os.unlink(self.path)
            except OSError:
                pass
        self.close()

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _symlink_error(path: str) -> CLIError:
    try:
        target = f" -> {os.readlink(path)}"
    except OSError:  # replaced by something else meanwhile
        target = ""
    return CLIError(f"output is a symbolic link: {path}{target} (sysprof never writes through "
                    f"a link; give the file's own path)")


def _open_output(output, force):
    """The :class:`_Output` for ``-o`` (None: a new ``sysprof-YYYYmmdd-HHMMSS[-N].json`` in the current directory,
    the first such name that is not taken by anything, symbolic links included: created exclusively)."""
    if output is not None:
        return _Output(output, force)
    stem = time.strftime("sysprof-%Y%m%d-%H%M%S")
    for n in range(10000):
        path = f"{stem}.json" if n == 0 else f"{stem}-{n}.json"
        try:
            return _Output(path, False)
        except CLIError:
            if os.path.lexists(path):
                continue
            raise
    raise CLIError(f"cannot find an unused name {stem}-N.json; give -o TRACE")


def _require_a_source(sampler, sources, follow_child: bool) -> None:
    """Raise CLIError when none of the requested ``sources`` (name -> bool) gives the sampler a channel; the
    command's own process (``follow_child``) is sampled later, by a second sampler, so it counts as there."""
    requested = [src for src, on in sources.items() if on and src != "per_cpu"]
    if follow_child and ("process" in requested or "process_tree" in requested):
        return
    channels = tuple(sampler.channels)
    if any(source_available(src, channels) for src in requested):
        return
    errors = dict(getattr(sampler, "errors", {}))
    why = "; ".join(f"{src}: {errors.get(src, 'no channels')}" for src in requested)
    raise CLIError(f"no requested source is available: {why}")


def _default_capacity(interval: float) -> int:
    """Sampler ring rows for about RING_SECONDS of samples (drained every DRAIN_PERIOD s), within bounds."""
    return int(min(MAX_CAPACITY, max(MIN_CAPACITY, math.ceil(RING_SECONDS / interval))))


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


class _Status:
    """The live status line on stderr (a terminal only)."""

    def __init__(self, enabled: bool, path: str):
        self.enabled = enabled
        self.path = path
        self.last = 0.0
        self.shown = False

    def update(self, elapsed, written, stats, nbytes, force=False):
        """``written``: sample rows written to the trace; ``stats``: the sampler's (``dropped``)."""
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self.last < STATUS_PERIOD:
            return
        self.last = now
        line = (f"{PROG}: {elapsed:7.1f} s  {written:>10,} samples  "
                f"{int(stats.get('dropped', 0)):,} dropped  {human_bytes(nbytes)}  {self.path}")
        sys.stderr.write("\r" + line + "\x1b[K")
        sys.stderr.flush()
        self.shown = True

    def clear(self):
        if self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            self.shown = False


def _sources_from_args(args, have_target: bool, pid_given: bool = False):
    names = ("cpu", "per_cpu", "memory", "disk", "net", "gpu", "load", "process", "process_tree", "pressure",
             "cgroup")
    chosen = {n: bool(getattr(args, n)) for n in names}
    if args.all:
        chosen = {n: True for n in names}
        chosen["process"] = chosen["process_tree"] = have_target
    elif not any(chosen.values()):
        chosen.update({n: True for n in DEFAULT_SOURCES})
        chosen["process"] = pid_given  # following a --pid: its process channels are the point
    if chosen["per_cpu"]:
        chosen["cpu"] = True
    return chosen


def cmd_record(args) -> int:
    command = list(args.command or [])
    if command and command[0] == "--":
        command = command[1:]
    if args.pid is not None and command:
        raise CLIError("give either a command or --pid, not both", status=2)
    target = bool(command) or args.pid is not None
    if args.process and not target:
        raise CLIError("--process follows a command (after --) or --pid PID; none given", status=2)
    if args.process_tree and not target:
        raise CLIError("--process-tree follows a command (after --) or --pid PID; none given", status=2)
    if args.pid is not None and not os.path.exists(f"/proc/{args.pid}"):
        raise CLIError(f"no such process: {args.pid}")
    sources = _sources_from_args(args, target, pid_given=args.pid is not None)
    quiet = args.quiet
    output = args.output

    # ---- pre-flight: nothing runs before these pass ----
    if output == "-":
        raise CLIError("writing to stdout is not supported; give -o FILE", status=2)
    if output is not None and os.path.islink(output):
        raise _symlink_error(output)  # checked for a clear message; the open refuses a link too (O_NOFOLLOW)
    if output is not None and os.path.isdir(output):
        raise CLIError(f"output is a directory: {output}", status=2)
    if command:
        _resolve_command(command)
    if output is not None and os.path.lexists(output) and not args.force:
        raise CLIError(f"output exists: {output} (use --force to overwrite)")
    sysprof = _import_sysprof()
    from sysprof.trace.chrome import ChromeTraceWriter

    kwargs = dict(interval=args.interval, cpu=sources["cpu"], per_cpu=sources["per_cpu"],
                  memory=sources["memory"], disk=sources["disk"], net=sources["net"], load=sources["load"],
                  process=sources["process"], gpu=sources["gpu"], pressure=sources["pressure"],
                  cgroup=sources["cgroup"], backend=args.backend,
                  capacity=args.capacity if args.capacity is not None else _default_capacity(args.interval))
    if sources["process_tree"]:
        kwargs["process_tree"] = True
    follow_child = (sources["process"] or sources["process_tree"]) and bool(command)
    if args.pid is not None and (sources["process"] or sources["process_tree"] or sources["cgroup"]):
        kwargs["pid"] = args.pid

    def make_sampler(**extra):
        kw = dict(kwargs, **extra)
        try:
            return sysprof.Sampler(**kw)
        except (ValueError, TypeError) as e:
            raise CLIError(f"cannot start the sampler: {e}") from None

    # Nothing touches an existing output until the arguments, the sources and the command have passed: it is
    # opened and locked before the command starts, and truncated only once the command runs.
    sampler = child = writer = out = None
    signals = _Signals()
    try:
        # validate the arguments (and warm up discovery) before anything is spawned
        sampler = make_sampler(process=False, process_tree=False) if follow_child else make_sampler()
        _require_a_source(sampler, sources, follow_child)
        out = _open_output(output, args.force)
        output = out.path
        if not follow_child:
            sampler.start()  # before the command starts, so its start-up is in the trace
        signals.install()
        if command:
            try:
                child = _Child(command)
            except FileNotFoundError:
                raise CLIError(f"command not found: {command[0]}", status=127) from None
            except PermissionError:
                raise CLIError(f"permission denied: {command[0]}", status=126) from None
            except OSError as e:
                raise CLIError(f"cannot run {command[0]}: {e.strerror or e}", status=126) from None
            signals.child_pid = child.pid
            for sig in list(signals.received):  # arrived while the command was being started
                signals.send(sig)
        try:
            out.truncate()
            writer = out.writer(ChromeTraceWriter)
        except OSError as e:
            raise CLIError(f"cannot write {output}: {e.strerror or e}") from None
        if follow_child:
            sampler = make_sampler(pid=child.pid)
            sampler.start()
    except BaseException:
        signals.restore()
        if sampler is not None:
            sampler.stop()
        if out is not None:
            out.discard()  # before the writer closes: the file goes while still locked
        if writer is not None:
            writer.close()
        if child is not None and child.poll() is None:  # pragma: no cover - only on a sampler failure
            child.popen.kill()
            child.popen.wait()
        raise

    for src, why in sorted(getattr(sampler, "errors", {}).items()):
        if src in ("gpu", "pressure", "cgroup") and not getattr(args, src) and args.all:
            continue  # --all takes what this machine has; asked for by name, its absence is news
        _warn(f"{src}: {why}", quiet)

    try:
        return _record_loop(args, sysprof, sampler, writer, child, signals, command, output, quiet)
    finally:
        signals.restore()
        if child is not None:
            child.close()


def _record_loop(args, sysprof, sampler, writer, child, signals, command, output, quiet) -> int:
    my_pid = os.getpid()
    proc_pid = child.pid if child is not None else args.pid
    float_ts = args.interval < 1e-3
    channels = tuple(sampler.channels)
    follows = any(c.startswith(("process/", "process_tree/")) for c in channels)
    builder = EventBuilder(channels, my_pid, proc_pid if follows else None,
                           float_ts=float_ts, changes_only=not args.every_row)
    # the command line (arguments, secrets among them, included) is written once: the start event's command_line
    cmdline = shlex.join(command) if command else (f"pid {args.pid}" if args.pid is not None else "")
    t_start_ns = time.time_ns()
    ts0 = t_start_ns / 1000.0 if float_ts else t_start_ns // 1000

    head = [{"name": "process_name", "ph": "M", "pid": my_pid, "tid": 0, "args": {"name": "sysprof: system"}},
            {"name": "process_sort_index", "ph": "M", "pid": my_pid, "tid": 0, "args": {"sort_index": 0}}]
    if builder.groups and proc_pid is not None and any(pid == proc_pid for _, pid, _, _ in builder.groups):
        name = f"{os.path.basename(command[0])} (pid {proc_pid})" if command else f"pid {proc_pid}"
        head += [{"name": "process_name", "ph": "M", "pid": proc_pid, "tid": 0, "args": {"name": name}},
                 {"name": "process_sort_index", "ph": "M", "pid": proc_pid, "tid": 0, "args": {"sort_index": 1}}]
    meta = {
        "version": _version(),
        "command_line": cmdline,
        "pid": proc_pid,
        "recorder_pid": my_pid,
        "interval_s": sampler.interval,
        "capacity": getattr(sampler, "capacity", None),
        "backend": getattr(sampler, "backend", None),
        "channels": list(channels),
        "errors": dict(getattr(sampler, "errors", {})),
        "host": platform.node(),
        "kernel": platform.release(),
        "cpu_count": os.cpu_count(),
        "start_time_ns": t_start_ns,
        "duration_limit_s": args.duration,
    }
    head.append({"name": START_EVENT, "ph": "i", "s": "g", "ts": ts0, "pid": my_pid, "tid": 0, "args": meta})

    status = _Status(enabled=not quiet and sys.stderr.isatty(), path=output)
    timeout = _Timeout(args.duration, args.kill_after)
    t0 = time.monotonic()
    last_flush = t0
    returncode = None
    failure = None
    try:
        writer.write_many(head)
        writer.flush()
        while True:
            # wait up to DRAIN_PERIOD for: the child to exit, a signal, the duration (or kill-after) to end
            left = timeout.remaining()
            wait = DRAIN_PERIOD if left is None else min(DRAIN_PERIOD, left)
            fds = [fd for fd in ((child.pidfd if child is not None else None), signals.wakeup_r) if fd is not None]
            try:
                if fds:
                    select.select(fds, [], [], wait)
                else:
                    time.sleep(wait)
            except InterruptedError:  # pragma: no cover - PEP 475 retries, kept for safety
                pass
            signals.drain_wakeup()

            batch = sampler.drain()
            if len(batch):
                writer.write_many(builder.events(batch))
            now = time.monotonic()
            if now - last_flush >= FLUSH_PERIOD:
                _write_stats_counter(writer, sampler, float_ts)
                writer.flush()
                last_flush = now
            status.update(now - t0, builder.rows, sampler.stats, writer.bytes_written)

            if child is not None:
                returncode = child.poll()
                if returncode is not None:
                    signals.child_pid = None
                    break
            elif args.pid is not None and not _pid_alive(args.pid):
                break
            elif signals.received:
                break
            if timeout.at is not None and time.monotonic() >= timeout.at:
                if child is None:
                    timeout.reached = True
                    break
                signals.send(timeout.step())  # keep recording while the command shuts down
    except Exception as e:  # a failure while recording: keep what we have, still wait for the child
        failure = e
    finally:
        try:
            sampler.stop()
        except Exception as e:  # pragma: no cover
            failure = failure or e
        stats = {}
        try:
            stats = dict(sampler.stats)
            batch = sampler.drain()
            if len(batch):
                writer.write_many(builder.events(batch))
            writer.write_many(builder.finish())
            _write_stats_counter(writer, sampler, float_ts)
            stats = dict(sampler.stats)
        except Exception as e:  # e.g. the disk filled up: what was flushed stays readable
            failure = failure or e
        t_end_ns = time.time_ns()
        stop_args = {"stats": stats, "samples_written": builder.rows, "elapsed_s": (t_end_ns - t_start_ns) / 1e9,
                     "signals": [signal.Signals(s).name for s in signals.received],
                     "signals_sent": list(signals.sent),
                     "duration_reached": timeout.reached, "errors": dict(getattr(sampler, "errors", {}))}
        if returncode is not None:
            stop_args["returncode"] = returncode
        try:
            writer.write({"name": STOP_EVENT, "ph": "i", "s": "g",
                          "ts": t_end_ns / 1000.0 if float_ts else t_end_ns // 1000,
                          "pid": my_pid, "tid": 0, "args": stop_args})
        except Exception as e:
            failure = failure or e
        try:
            writer.close()
        except Exception as e:
            failure = failure or e
        status.clear()

    if failure is not None:
        print(f"{PROG}: recording stopped early: {type(failure).__name__}: {failure}; the trace is incomplete "
              f"(run 'sysprof repair {output}' if it is not closed)", file=sys.stderr, flush=True)

    if child is not None and returncode is None:  # the recording failed: still wait for the command
        returncode = _wait_child(child, signals, timeout)

    if not quiet and failure is None:
        written, dropped = builder.rows, int(stats.get("dropped", 0))
        elapsed = (t_end_ns - t_start_ns) / 1e9
        size = os.path.getsize(output) if os.path.exists(output) else writer.bytes_written
        print(f"{PROG}: wrote {output}: {written:,} samples in {elapsed:.1f} s "
              f"({written / elapsed if elapsed > 0 else 0:.0f}/s), {dropped:,} dropped"
              f"{' (the ring was full: raise --capacity)' if dropped else ''}, "
              f"{int(stats.get('missed_deadlines', 0)):,} missed deadlines, {human_bytes(size)}",
              file=sys.stderr, flush=True)
    if child is not None and _exit_status(returncode) != 0:
        return _exit_status(returncode)  # the command's failure comes first
    return 1 if failure is not None else 0


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


def _write_stats_counter(writer, sampler, float_ts):
    st = sampler.stats
    t = time.time_ns()
    writer.write({"name": STATS_COUNTER, "ph": "C", "ts": t / 1000.0 if float_ts else t // 1000,
                  "pid": os.getpid(), "tid": 0,
                  "args": {"taken": st.get("taken"), "dropped": st.get("dropped"),
                           "missed_deadlines": st.get("missed_deadlines")}})




# --------------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------------

def cmd_report(args) -> int:
    _import_sysprof()
    from sysprof.trace.chrome import read_trace

    if args.smooth and not args.plot:
        raise CLIError("--smooth applies to --plot FILE.png (see 'sysprof report --help')", status=2)
    if args.plot:
        require_matplotlib()
    data = TraceData(_read_trace_or_fail(read_trace, args.trace))
    if not data.series:
        raise CLIError(f"{args.trace}: no counter events (is it a sysprof trace?)")
    summary = summarize(data)
    keep = channel_filter(args.channel)
    summary["channels"] = {ch: e for ch, e in summary["channels"].items() if keep(ch)}
    if not summary["channels"]:
        raise CLIError(f"no channel matches {' or '.join(repr(p) for p in args.channel)} "
                       f"({len(data.series)} channels in {args.trace}; 'sysprof report --all' lists them)")
    plotted = None
    if args.plot:
        plotted = plot_trace(data, args.plot, channel_filter=keep if args.channel else None,
                             title=summary.get("command") or args.trace, smooth_s=args.smooth)
    if args.json:
        json.dump(summary, sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
    else:
        print_table(summary, args.trace, show_all=args.all or bool(args.channel))
        if plotted is not None:
            print(f"\nplot: {args.plot} ({plotted} series)")
    return 0


def _read_trace_or_fail(read_trace, path):
    if not os.path.exists(path):
        raise CLIError(f"no such file: {path}")
    try:
        return read_trace(path)
    except (OSError, ValueError, EOFError) as e:
        raise CLIError(f"cannot read {path}: {e}") from None


# --------------------------------------------------------------------------------------------------
# info, repair, bench
# --------------------------------------------------------------------------------------------------

PROC_FILES = ("/proc/stat", "/proc/meminfo", "/proc/diskstats", "/proc/net/dev", "/proc/loadavg",
              "/proc/self/stat", "/proc/pressure/cpu", "/proc/pressure/memory", "/proc/pressure/io")


def _readable(path: str):
    try:
        with open(path, "rb") as f:
            f.read(1)
        return True, None
    except OSError as e:
        return False, e.strerror or str(e)


def _cgroup_version(root: str = "/sys/fs/cgroup") -> str:
    if os.path.exists(os.path.join(root, "cgroup.controllers")):
        return "v2 (unified)"
    if os.path.exists(os.path.join(root, "unified", "cgroup.controllers")):
        return "hybrid (v1 controllers + v2 at /sys/fs/cgroup/unified)"
    if os.path.isdir(os.path.join(root, "memory")) or os.path.isdir(os.path.join(root, "cpu")):
        return "v1"
    return "none found"


def _nvml_info():
    import ctypes
    import ctypes.util

    env = os.environ.get("SYSPROF_NVML_LIBRARY")
    found = ctypes.util.find_library("nvidia-ml")
    candidates = ([(env, "SYSPROF_NVML_LIBRARY")] if env else []) + \
        [(found or "libnvidia-ml.so.1", "ctypes.util.find_library('nvidia-ml')" if found else "the loader path")]
    errors = []
    for lib, how in candidates:
        try:
            ctypes.CDLL(lib)
            return {"found": True, "library": lib, "source": how}
        except OSError as e:
            errors.append(f"{lib} ({how}): {str(e).split(': ')[-1]}")
    return {"found": False, "library": None,
            "reason": "; ".join(errors) + " -- install the NVIDIA driver or set SYSPROF_NVML_LIBRARY"}


def gather_info() -> dict:
    info = {"version": _version(), "python": platform.python_version(), "kernel": platform.release(),
            "machine": platform.machine(), "cpu_count": os.cpu_count()}
    try:
        info["cpu_affinity"] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        info["cpu_affinity"] = None
    try:
        import sysprof
    except ImportError as e:
        raise CLIError(f"cannot import the sysprof package: {e}") from None
    try:
        ok, why = sysprof.native_available()
    except AttributeError:  # pragma: no cover - an older package
        try:
            import sysprof._native  # noqa: F401
            ok, why = True, ""
        except ImportError as e:
            ok, why = False, f"sysprof._native not importable: {e}"
    info["native"] = {"available": bool(ok),
                      "reason": "the C++ extension sysprof._native is loaded and /proc is there" if ok else why}
    sources = {}
    try:
        s = sysprof.Sampler(interval=0.01, cpu=True, per_cpu=True, memory=True, disk=True, net=True, load=True,
                            process=True, gpu=True, pressure=True, cgroup=True, process_tree=True)
        info["backend"] = s.backend
        errors = dict(s.errors)
        chans = list(s.channels)
    except Exception as e:
        info["backend"] = None
        info["sampler_error"] = f"{type(e).__name__}: {e}"
        errors, chans = {}, []
    prefix = {"cpu": "cpu/", "memory": "memory/", "swap": "swap/", "disk": "disk/", "net": "net/", "load": "load/",
              "process": "process/", "process_tree": "process_tree/", "pressure": "pressure/", "cgroup": "cgroup/",
              "gpu": "gpu/"}
    for src, pre in prefix.items():
        n = sum(1 for c in chans if c.startswith(pre))
        if src in errors:
            sources[src] = {"available": n > 0, "channels": n, "reason": errors[src]}
        elif n:
            sources[src] = {"available": True, "channels": n}
        else:
            sources[src] = {"available": False, "channels": 0, "reason": "no channels"}
    info["sources"] = sources
    info["nvml"] = _nvml_info()
    info["cgroup"] = _cgroup_version()
    info["proc_files"] = {p: ({"readable": True} if ok else {"readable": False, "reason": why})
                          for p in PROC_FILES for ok, why in [_readable(p)]}
    return info


def cmd_info(args) -> int:
    info = gather_info()
    if args.json:
        json.dump(jsonable(info), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    w = sys.stdout.write
    nat = info["native"]
    w(f"sysprof {info['version']} (python {info['python']})\n")
    backend = info.get("backend") or "none"
    if backend == "psutil" and nat["available"]:
        why = "native available but not chosen"
    elif backend == "psutil":
        why = f"fallback: {nat['reason']}"
    else:
        why = nat["reason"]
    w(f"backend:  {backend}  ({why})\n")
    if info.get("sampler_error"):
        w(f"sampler:  cannot construct: {info['sampler_error']}\n")
    w(f"kernel:   {info['kernel']} ({info['machine']})\n")
    w(f"cpus:     {info['cpu_count']} online, {info['cpu_affinity']} usable by this process\n")
    w(f"cgroup:   {info['cgroup']}\n")
    nv = info["nvml"]
    w(f"nvml:     {'found: ' + nv['library'] if nv['found'] else 'not found: ' + nv['reason']}\n")
    w("sources:\n")
    for src, e in info["sources"].items():
        if e["available"]:
            w(f"  {src:<8} yes  ({e['channels']} channels)" + (f"; note: {e['reason']}" if e.get("reason") else "") + "\n")
        else:
            w(f"  {src:<8} no   ({e.get('reason')})\n")
    w("proc files:\n")
    for p, e in info["proc_files"].items():
        w(f"  {p:<22} {'readable' if e['readable'] else 'not readable: ' + e['reason']}\n")
    return 0


def cmd_repair(args) -> int:
    _import_sysprof()
    from sysprof.trace.chrome import TraceBusyError, repair_trace

    if not os.path.exists(args.trace):
        raise CLIError(f"no such file: {args.trace}")
    try:
        n = repair_trace(args.trace)
    except TraceBusyError as e:
        who = f"pid {e.pid}" if e.pid else "another process"
        raise CLIError(f"cannot repair {args.trace}: it is locked by {who}, a recorder still writing it; "
                       f"repair it once that ends") from None
    except (OSError, ValueError, EOFError) as e:
        raise CLIError(f"cannot repair {args.trace}: {e}") from None
    print(f"{PROG}: {args.trace}: {n:,} events kept; the trace is closed")
    return 0


#: the directory above the package: a source checkout when sysprof runs from one (an editable install)
_PACKAGE_PARENT = Path(__file__).resolve().parent.parent.parent


def _bench_script():
    """``benchmarks/run.py`` of a sysprof source checkout: the current directory's, else the one beside the
    package (an editable install); None after ``pip install .``. A checkout is told by its pyproject.toml
    naming the project sysprof, so another project's benchmarks/run.py is never run."""
    for root in (Path.cwd(), _PACKAGE_PARENT):
        script = root / "benchmarks" / "run.py"
        try:
            if script.is_file() and re.search(r'^name\s*=\s*"sysprof"', (root / "pyproject.toml").read_text(), re.M):
                return script
        except (OSError, UnicodeDecodeError):
            continue
    return None


def cmd_bench(args) -> int:
    script = _bench_script()
    if script is None:
        raise CLIError(f"bench needs a source checkout (benchmarks/run.py not found in {os.getcwd()})", status=2)
    rest = list(args.bench_args or [])
    if rest and rest[0] == "--":
        rest = rest[1:]
    return subprocess.call([sys.executable, str(script), *rest])


# --------------------------------------------------------------------------------------------------
# parser and entry point
# --------------------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="High-frequency system-metrics profiler for ML training.")
    p.add_argument("--version", action="version", version=f"{PROG} {_version()}")
    sub = p.add_subparsers(dest="subcommand", metavar="COMMAND", parser_class=_Parser)

    r = sub.add_parser("record", help="sample system metrics while a command runs; write a Chrome/Perfetto trace",
                       description="Sample system metrics while COMMAND runs (or for --duration, or until Ctrl-C) "
                                   "and write a Chrome trace-event JSON file (open it in ui.perfetto.dev). "
                                   "Exit status: the command's when it is not 0; otherwise 1 if the trace could "
                                   "not be written completely (e.g. the disk filled up), else 0. "
                                   "SIGINT/SIGTERM/SIGHUP/SIGQUIT are passed on to the command; should it "
                                   "ignore them, a second one sends it SIGTERM and a third SIGKILL.")
    r.add_argument("-o", "--output", metavar="TRACE",
                   help="trace file (.json, or .json.gz for gzip; not '-'); default: a new "
                        "sysprof-YYYYmmdd-HHMMSS.json in the current directory (-1, -2, ... added if that "
                        "exists; never overwritten). A symbolic link at TRACE, even a dangling one, is refused: "
                        "sysprof never writes through a link. The trace is locked (flock) while recorded: a "
                        "second 'record' on it fails before its command starts. The trace holds the command "
                        "line, every argument included")
    r.add_argument("-f", "--force", action="store_true",
                   help="overwrite an existing output file (emptied in place once the command has started)")
    r.add_argument("-i", "--interval", type=parse_time, default=parse_time(DEFAULT_INTERVAL), metavar="TIME",
                   help=f"sampling interval: 1ms, 500us, 0.5s, 2 (seconds); default {DEFAULT_INTERVAL}")
    r.add_argument("-d", "--duration", type=parse_time, metavar="TIME",
                   help="stop after this long (a running command is then sent SIGTERM, like timeout(1), and "
                        "recorded until it exits)")
    r.add_argument("--kill-after", type=parse_time, default=parse_time(DEFAULT_KILL_AFTER), metavar="TIME",
                   help=f"with --duration: send SIGKILL if the command is still running this long after the "
                        f"SIGTERM (default {DEFAULT_KILL_AFTER})")
    g = r.add_argument_group("sources (default: --cpu --memory --disk --net; with --pid also --process)")
    g.add_argument("--cpu", action="store_true", help="CPU utilisation by mode (/proc/stat)")
    g.add_argument("--per-cpu", dest="per_cpu", action="store_true", help="also per-CPU utilisation")
    g.add_argument("--memory", action="store_true", help="memory and swap (/proc/meminfo)")
    g.add_argument("--disk", action="store_true", help="per-disk I/O (/proc/diskstats)")
    g.add_argument("--net", action="store_true", help="per-interface network I/O (/proc/net/dev)")
    g.add_argument("--load", action="store_true", help="load average (/proc/loadavg)")
    g.add_argument("--gpu", action="store_true", help="NVIDIA GPUs through NVML")
    g.add_argument("--process", action="store_true",
                   help="the command's own process (RSS, CPU, threads), not sysprof's")
    g.add_argument("--process-tree", dest="process_tree", action="store_true",
                   help="the command (or --pid) and all its descendants, e.g. DataLoader workers, summed "
                        "(processes, RSS, CPU, threads)")
    g.add_argument("--pressure", action="store_true", help="pressure stall information (/proc/pressure)")
    g.add_argument("--cgroup", action="store_true",
                   help="memory, CPU and I/O of the cgroup v2 of --pid, else sysprof's (where COMMAND starts)")
    g.add_argument("--all", action="store_true",
                   help="every source (--process and --process-tree when there is a command or --pid)")
    r.add_argument("--pid", type=int, metavar="PID", help="follow an existing process instead of running a command")
    r.add_argument("--backend", choices=("auto", "native", "psutil"), default="auto", help="sampler backend")
    r.add_argument("--every-row", action="store_true",
                   help="write every channel group at every sample (default: only when a value changed)")
    r.add_argument("--capacity", type=int, metavar="ROWS",
                   help=f"sampler ring-buffer rows, 8 x (1 + channels) bytes each; default about "
                        f"{RING_SECONDS:g} s of samples: ceil({RING_SECONDS:g} / interval), "
                        f"{MIN_CAPACITY} to {MAX_CAPACITY}")
    r.add_argument("-q", "--quiet", action="store_true", help="no status line, warnings or summary")
    r.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARGS...]",
                   help="the command to run and record")
    r.set_defaults(func=cmd_record)

    rp = sub.add_parser("report", help="summarize a trace: per-channel statistics, rate, drops; --plot, --json",
                        description="Per-channel statistics (min, mean, p50, p95, max) of a sysprof trace.")
    rp.add_argument("trace", metavar="TRACE")
    rp.add_argument("--json", action="store_true", help="machine-readable output")
    rp.add_argument("--plot", metavar="FILE.png", help="draw the series on a shared time axis (needs matplotlib)")
    rp.add_argument("--smooth", type=parse_time, metavar="TIME",
                    help="with --plot: plot a moving average over this window (e.g. 100ms) instead of the raw steps")
    rp.add_argument("-k", "--channel", action="append", metavar="PATTERN",
                    help="only channels matching this glob or substring (repeatable)")
    rp.add_argument("--all", action="store_true", help="also list channels that were always 0")
    rp.set_defaults(func=cmd_report)

    inf = sub.add_parser("info", help="backend, available sources and why not, kernel, CPUs",
                         description="What sysprof can sample on this machine, and why not.")
    inf.add_argument("--json", action="store_true", help="machine-readable output")
    inf.set_defaults(func=cmd_info)

    rep = sub.add_parser("repair", help="close a truncated trace (e.g. of a killed recorder)",
                         description="Rewrite a truncated trace as valid JSON, keeping every complete event. "
                                     "A symbolic link is followed: the file it points to is repaired and the "
                                     "link kept. A trace still being recorded (its recorder holds the lock) is "
                                     "refused; a killed recorder's lock is gone with it.")
    rep.add_argument("trace", metavar="TRACE")
    rep.set_defaults(func=cmd_repair)

    b = sub.add_parser("bench", help="run the benchmarks (benchmarks/run.py of a source checkout)", add_help=False)
    b.add_argument("bench_args", nargs=argparse.REMAINDER)
    b.set_defaults(func=cmd_bench)
    return p


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        parser = build_parser()
        args, extras = parser.parse_known_args(argv)
        if extras and getattr(args, "subcommand", None) == "bench":  # everything goes to benchmarks/run.py
            args.bench_args, extras = extras + list(args.bench_args or []), []
        if extras:
            sub = f"{PROG} {args.subcommand}" if getattr(args, "subcommand", None) else PROG
            raise CLIError(f"unrecognized arguments: {' '.join(extras)} (see '{sub} --help')", status=2)
        if getattr(args, "func", None) is None:
            parser.print_help(sys.stderr)
            return 2
        return int(args.func(args) or 0)
    except (CLIError, ReportError) as e:
        print(f"{PROG}: {e}", file=sys.stderr, flush=True)
        return getattr(e, "status", 1)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr, flush=True)
        return 130
    except BrokenPipeError:
        try:  # `sysprof report x | head`: stdout went away; say nothing more
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 141
    except SystemExit:
        raise
    except Exception as e:  # never a traceback, unless asked for
        if os.environ.get("SYSPROF_DEBUG"):
            raise
        print(f"{PROG}: internal error: {type(e).__name__}: {e} (set SYSPROF_DEBUG=1 for a traceback)",
              file=sys.stderr, flush=True)
        return 70


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
