"""``sysprof record``: check the arguments, open the trace, start the sampler and the command (:func:`cmd_record`),
then pump a recording session (:class:`sysprof.pipeline.Session`: the sampler into the trace) until the command
ends (:class:`_Recording`: start, loop, finish)."""
from __future__ import annotations

import os
import select
import shlex
import signal
import sys
import time
import uuid

from ..distributed import rank_info
from ..markers.receiver import MarkerReceiver, Markers
from ..pipeline import Session
from ..pipeline.producers import standard
from ..report import format_seconds, human_bytes
from ..report.table import round_up_125
from ..sampling.registry import SOURCES, decimals_of, source_of
from ..text import text
from ..trace import events as ev
from ..trace.perfetto import is_perfetto_path, protos, writer_class_for
from ..trace.schema import START_EVENT
from ..trace.sink import COUNTED_STATS, TraceSink
from .child import _Child, _exit_status, _pid_alive, _resolve_command, _Signals, _Timeout, _wait_child
from .common import PROG, CLIError, _import_sysprof, _warn, check_output_path
from .output import DEFAULT_MIN_FREE, MIN_MAX_SIZE, _open_output, _SpaceGuard, _symlink_error, check_parts_free
from .sources import (_require_a_source, _sources_from_args, check_targets, devices_from_args, gpus_from_args,
                      intervals_from_args, requested, sampler_kwargs, target_sources, warn_problems)

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
#: warn (while recording, once, and in the closing summary) when more than this share of the sampling deadlines
#: was missed: the --interval is shorter than this machine samples (a busy machine misses some deadlines at 10 ms,
#: 15 % of them on a 2-CPU host with every core taken; a 1 us interval misses nearly all)
MISSED_SHARE_WARN = 0.5
#: ... judged once this many deadlines have passed and this many seconds (a start-up hiccup is not the machine)
MISSED_MIN_TICKS = 1000
MISSED_MIN_SECONDS = 1.0


def _default_capacity(interval: float) -> int:
    """Sampler ring rows for about RING_SECONDS of samples (drained every DRAIN_PERIOD s), within bounds."""
    from ..sampling.sampler import ring_capacity

    return ring_capacity(interval, RING_SECONDS, MIN_CAPACITY, MAX_CAPACITY)


def _followed_argv(pid: int) -> list:
    """The command line of a --pid process (/proc/<pid>/cmdline), or [] where it cannot be read (a kernel
    thread, a process of another user, one that has exited)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read(1 << 16)
    except OSError:
        return []
    return [text(a) for a in raw.split(b"\0") if a]


def _preflight(args, command) -> None:
    """Checks before anything runs or any file is touched: the output's name, the command."""
    output = args.output
    if output == "-":
        raise CLIError("writing to stdout is not supported; give -o FILE", status=2)
    if output is not None and os.path.islink(output):
        raise _symlink_error(output)  # checked for a clear message; the open refuses a link too (O_NOFOLLOW)
    if output is not None:
        check_output_path(output)  # a directory, a missing folder: said before the sampler or command starts
    if args.max_size is not None and args.max_size < MIN_MAX_SIZE:
        raise CLIError(f"--max-size must be at least {human_bytes(MIN_MAX_SIZE)}, got {human_bytes(args.max_size)}",
                       status=2)
    if command:
        _resolve_command(command)
    if args.max_size is not None and output is not None:
        if os.path.exists(output) and not os.path.isfile(output):  # e.g. /dev/null: no parts next to it
            raise CLIError(f"--max-size writes parts of a regular file; {output} is not one", status=2)
        check_parts_free(output)  # with --max-size the parts are written, never TRACE itself
    elif output is not None and os.path.lexists(output) and not args.force:
        raise CLIError(f"output exists: {output} (use --force to overwrite)")
    if output is not None and is_perfetto_path(output):
        try:
            protos()
        except ImportError as e:
            raise CLIError(str(e), status=2) from None


def cmd_record(args) -> int:
    command = list(args.command or [])
    if command and command[0] == "--":
        command = command[1:]
    if args.pid is not None and command:
        raise CLIError("give either a command or --pid, not both", status=2)
    target = bool(command) or args.pid is not None
    check_targets(args, target)
    if args.pid is not None and not os.path.exists(f"/proc/{args.pid}"):
        raise CLIError(f"no such process: {args.pid}")
    sources = _sources_from_args(args, target)
    intervals = intervals_from_args(args, sources)
    devices = devices_from_args(args)
    recording = _Recording
    if getattr(args, "flight", None) is not None:  # --flight: dumps around anomalies instead of a trace
        from .flight import FlightRecording as recording
    recording.preflight(args, command)
    sysprof = _import_sysprof()

    kwargs = dict(sampler_kwargs(sources), interval=args.interval, backend=args.backend,
                  capacity=args.capacity if args.capacity is not None else _default_capacity(args.interval),
                  devices=devices, gpus=gpus_from_args(args), budget=args.budget)
    asked = requested(sources)
    followed = [name for name in asked if name in target_sources()]
    follow_child = bool(followed) and bool(command)
    if args.pid is not None and any(SOURCES[name].follows_pid for name in asked):
        kwargs["pid"] = args.pid

    def make_sampler(**extra):
        kw = dict(kwargs, **extra)
        kw["intervals"] = {name: v for name, v in intervals.items() if kw.get(name)}  # of the sources it samples
        try:
            return sysprof.Sampler(**kw)
        except (ValueError, TypeError) as e:
            raise CLIError(f"cannot start the sampler: {e}") from None

    rec = recording(args, command)
    try:
        rec.start(make_sampler, sources, follow_child, {name: False for name in followed})
    except BaseException:
        rec.abort()
        raise
    try:
        warn_problems(rec.sampler, args, args.quiet)
    except Exception:  # noqa: BLE001 - a warning that cannot be worded never stops the recording
        pass
    if not command and args.pid is None and not args.quiet:  # `record` or `record --`: say what it does
        until = (f"for {format_seconds(args.duration)} (Ctrl-C or SIGTERM stops it sooner)" if args.duration else
                 "until Ctrl-C or SIGTERM (--duration TIME stops it after TIME)")
        print(f"{PROG}: no command given: recording the whole machine into {rec.output} {until}",
              file=sys.stderr, flush=True)
    try:
        return rec.run()
    finally:
        rec.signals.restore()
        if rec.child is not None:
            rec.child.close()


class _Recording:
    """One ``record`` run: :meth:`start` (output, sampler, command), :meth:`run` (the session: the trace's head,
    the loop, the end, the summary line, the exit status); :meth:`abort` undoes a start that failed.

    The recording assembles a :class:`~sysprof.pipeline.Session` (the sampler, the standard producers and the
    markers' :class:`~sysprof.markers.receiver.Markers`, one :class:`~sysprof.trace.sink.TraceSink`) and pumps it
    at each wakeup of its loop, which waits on the command, the signals and --duration; it keeps the command's
    supervision, the status line, the free-space floor, --max-size's parts and the missed-deadlines warning."""

    preflight = staticmethod(_preflight)

    def __init__(self, args, command):
        self.args = args
        self.command = command
        self.quiet = args.quiet
        self.output = args.output
        self.sampler = self.child = self.writer = self.out = self.markers = self.parts = None
        self.session = self.sink = None
        self.stopped = None  # why writing stopped before the end (the free-space floor), else None
        self.part_base = ({}, 0)  # the sampler's stats and the rows written when the current file began
        self.signals = _Signals()
        self.my_pid = os.getpid()
        self.float_ts = args.interval < 1e-3
        self.returncode = None
        self.failure = None
        self.stats = {}
        self.t_start_ns = self.t_end_ns = 0
        self.missed_warned = False  # the missed-deadlines warning was given while recording

    # ---- start ----
    def start(self, make_sampler, sources, follow_child, without_followed) -> None:
        """Nothing touches an existing output until the arguments, the sources and the command have passed: it
        is opened and locked before the command starts, and truncated only once the command runs."""
        # validate the arguments (and warm up discovery) before anything is spawned
        self.sampler = make_sampler(**without_followed) if follow_child else make_sampler()
        _require_a_source(self.sampler, sources, follow_child)
        self.out = self._open_output()
        if self.args.max_size is not None:  # the parts of one recording (--max-size): the first is open
            self.parts, self.out = self.out, self.out.current
            self.recording_id = uuid.uuid4().hex
        self.output = self.out.path
        self.guard = _SpaceGuard(self.output, self.args.min_free or DEFAULT_MIN_FREE, self.out.regular)
        if not follow_child:
            self.sampler.start()  # before the command starts, so its start-up is in the trace
        self.signals.install()
        if self.command:
            self.markers = _marker_receiver()
            self._spawn()
        try:
            self.out.truncate()
            self.writer = self._writer()
        except OSError as e:
            raise CLIError(f"cannot write {self.output}: {e.strerror or e}") from None
        if follow_child:
            self.sampler = make_sampler(pid=self.child.pid)
            self.sampler.start()

    def _open_output(self):
        return _open_output(self.output, self.args.force, self.args.max_size)

    def _writer(self):
        return self.out.writer(writer_class_for(self.output))  # .pftrace: Perfetto's protobuf

    def _spawn(self) -> None:
        name = self.command[0]
        env_saved = os.environ.get(self.markers.env[0]) if self.markers is not None else None
        try:
            if self.markers is not None:  # the child (and its children) find the markers' directory here
                os.environ[self.markers.env[0]] = self.markers.env[1]
            self.child = _Child(self.command)
        except FileNotFoundError:
            raise CLIError(f"command not found: {name}", status=127) from None
        except PermissionError:
            raise CLIError(f"permission denied: {name}", status=126) from None
        except OSError as e:
            raise CLIError(f"cannot run {name}: {e.strerror or e}", status=126) from None
        finally:
            if self.markers is not None:
                if env_saved is None:
                    os.environ.pop(self.markers.env[0], None)
                else:
                    os.environ[self.markers.env[0]] = env_saved
        self.signals.child_pid = self.child.pid
        for sig in list(self.signals.received):  # arrived while the command was being started
            self.signals.send(sig)

    def abort(self) -> None:
        self.signals.restore()
        if self.sampler is not None:
            self.sampler.stop()
        if self.markers is not None:
            self.markers.close()
        if self.out is not None:
            self.out.discard()  # before the writer closes: the file goes while still locked
        if self.writer is not None:
            self.writer.close()
        child = self.child
        if child is not None and child.poll() is None:  # pragma: no cover - only on a sampler failure
            child.popen.kill()
            child.popen.wait()

    # ---- the recording ----
    def run(self) -> int:
        """Records until the command ends. No failure inside the recorder leaves the command orphaned or the
        trace unclosed: a failure stops the recording, the stop event is still written, the trace closed, and the
        command waited for (its exit status first)."""
        self.t_start_ns = time.time_ns()
        self.timeout = _Timeout(self.args.duration, self.args.kill_after)
        self.status = _Status(enabled=not self.quiet and sys.stderr.isatty(), path=self.output)
        try:
            self.session = self._session()
            self.session.start(thread=False, start_sampler=False, t_start_ns=self.t_start_ns)  # writes the head
            self._check_space()  # already low: the trace ends at once, the command runs
            self._loop()
        except Exception as e:  # a failure while recording: keep what we have, still wait for the child
            self.failure = self.failure or e
        finally:
            try:
                self._finish()
            except Exception as e:  # noqa: BLE001 - _finish guards each step; this is the last net
                self.failure = self.failure or e
        return self._conclude()

    def _session(self) -> Session:
        """The pipeline: the sampler, the standard producers (XIDs, interval changes, GPU refresh periods and
        driver samples), the command's markers, and the sink."""
        self.proc_pid = self.child.pid if self.child is not None else self.args.pid
        producers = standard(self.sampler, self.my_pid, self._intervals_changed)
        if self.markers is not None:
            producers.append(Markers(self.markers))
        self._producers = {p.name for p in producers}
        return Session(self.sampler, [self._sink()], producers, flush_period=FLUSH_PERIOD, on_failure=self._failed)

    def _sink(self):
        """The trace file's sink (its head: :meth:`_head`)."""
        sampler = self.sampler
        self.sink = TraceSink(self.writer, lambda sink: self._head(sink.builder), system_pid=self.my_pid,
                              process_pid=self._process_pid(), float_ts=self.float_ts,
                              changes_only=not self.args.every_row, decimals=lambda ch: _decimals(ch, sampler),
                              stats=lambda: dict(sampler.stats))
        return self.sink

    def _process_pid(self):
        """The followed process's pid where sources have tracks on it (``process/*``, ``process_tree/*``)."""
        on_track = tuple(p for name in target_sources() for p in SOURCES[name].prefixes)
        follows = on_track and any(c.startswith(on_track) for c in self.sampler.channels)
        return self.proc_pid if follows else None

    def _written(self) -> int:
        """Sample rows written."""
        return self.sink.samples_written if self.sink is not None else 0

    def _failed(self, what: str, e: BaseException) -> None:
        """The session's failures: a producer's is said (and in the stop event's errors), the recording goes on;
        any other (the trace, the sampler) stops the recording."""
        if what in self._producers:
            self.status.clear()
            _warn(f"{what}: {type(e).__name__}: {e}; the recording goes on without them", self.quiet)
        else:
            self.failure = self.failure or e

    def _intervals_changed(self) -> None:
        self.status.clear()
        _warn(f"budget: {self.sampler.errors.get('budget', 'intervals changed')}", self.quiet)

    def _head(self, builder) -> list:
        """The trace's first events (:func:`sysprof.trace.events.head`): process names, the rank metadata, the
        start event with the metadata, the units. The rank metadata are Composer's (``global_rank``: the rank of
        :func:`sysprof.distributed.rank_info`, ``$RANK``, Slurm's, or 0; ``clock_sync_timestamp_us``:
        the start time), so Composer's and sysprof's mergers take a record trace with Composer traces: a merger
        shifts each rank's events by its clock sync's offset from the lowest rank's, so record with the ``RANK``
        of a rank that shares this machine's clock (rank 0's on its node; same rank: no shift)."""
        args, my_pid, proc_pid, command = self.args, self.my_pid, self.proc_pid, self.command
        # the command line (arguments, secrets among them, included) is written once: the start event's
        followed = _followed_argv(args.pid) if args.pid is not None and not command else []
        cmdline = shlex.join(command) if command else (shlex.join(followed) if followed else
                                                       f"pid {args.pid}" if args.pid is not None else "")
        names = ev.process_name(my_pid, "sysprof: system", 0)
        if proc_pid is not None and any(pid == proc_pid for _, pid, _, _ in builder.groups):
            argv0 = command[0] if command else (followed[0] if followed else "")
            names += ev.process_name(proc_pid, f"{os.path.basename(argv0)} (pid {proc_pid})" if argv0 else
                                     f"pid {proc_pid}", 1)
            if self.markers is not None:
                self.markers.named(proc_pid)
        part = {}
        if self.parts is not None:  # --max-size: part 1 of the recording
            part["part"] = {"index": self.parts.index, "recording_id": self.recording_id,
                            "max_size_bytes": self.parts.max_size}
        meta = ev.start_metadata(self.sampler, tuple(self.sampler.channels), self.t_start_ns, recorder_pid=my_pid,
                                 pid=proc_pid, command_line=cmdline, duration_limit_s=args.duration,
                                 ranks=rank_info().as_dict(),  # RANK etc. (torchrun, Slurm) of this recorder's job
                                 **part)
        return ev.head(meta, my_pid, self.t_start_ns, builder.layout.units, names)

    def _loop(self) -> None:
        """Pump the session until the command exits, a signal, --duration, or --pid's end."""
        args, child, signals, timeout, session = self.args, self.child, self.signals, self.timeout, self.session
        t0 = time.monotonic()
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

            if not session.closed:  # else writing stopped (the free-space floor): the command runs on
                session.pump()
                self._drained(time.monotonic() - t0)
            if self.failure is not None:
                return  # the recording stops (the command is still waited for)
            if session.closed and child is None:
                return  # writing stopped and no command to keep running

            if child is not None:
                self.returncode = child.poll()
                if self.returncode is not None:
                    signals.child_pid = None
                    return
            elif args.pid is not None and not _pid_alive(args.pid):
                return
            elif signals.received:
                return
            if timeout.at is not None and time.monotonic() >= timeout.at:
                if child is None:
                    timeout.reached = True
                    return
                signals.send(timeout.step())  # keep recording while the command shuts down

    def _drained(self, elapsed: float) -> None:
        """After each pump: the free-space floor, the next part, the status line, the missed-deadlines warning."""
        self._check_space()  # one statvfs a drain
        if self.stopped is None and self.failure is None and self.parts is not None and self.parts.full():
            self._next_part()
        stats = self.sampler.stats
        self.status.update(elapsed, self._written(), stats, self._bytes_shown())
        if not self.missed_warned and elapsed >= MISSED_MIN_SECONDS:
            self._warn_missed(stats, elapsed, live=True)

    def _bytes_shown(self) -> int:
        """The status line's bytes: the trace's on disk as flushed (gzip: compressed), else the writer's count (a
        device)."""
        size = getattr(self.out, "size", None)
        return size() if size is not None and self.out.regular else self.writer.bytes_written

    def _guard(self, step, *args):
        """``step(*args)``; a failure is kept (the first one) and None returned, so the steps after it still run."""
        try:
            return step(*args)
        except Exception as e:  # noqa: BLE001
            self.failure = self.failure or e
            return None

    def _finish(self) -> None:
        """Stop the session (the sampler stopped, the last rows and markers, the stop event, the trace closed;
        each step guarded, so the stop event and the close are always tried)."""
        if self.session is not None:
            self._stop()
        else:  # the session could not be assembled: the sampler stopped, the trace closed
            self._guard(self.sampler.stop)
            if self.writer is not None:
                self._guard(self.writer.close)
        if self.markers is not None:  # its directory goes, whatever ended the recording (idempotent)
            self._guard(self.markers.close)
        self._guard(self.status.clear)

    def _stop(self) -> None:
        """Stop the session (the last rows, the stop event, the trace closed) and count a part's bytes; once."""
        if self.session.stop(self._stop_args) is not None and self.parts is not None:
            self._guard(self.parts.finished)

    def _stop_args(self, args: dict, next_part=None) -> None:
        """``record``'s part of the stop event's arguments, added to the session's ``args`` (in place): the
        signals, --duration, the command's status, the process tree's members, the failure, the part (a part's
        counts are its own: since :attr:`part_base`; ``next_part``: the part after it), the stopped writing."""
        self.t_end_ns = time.time_ns()
        self.stats = stats = dict(args.get("stats") or {})
        if next_part is not None and isinstance(stats.get("taken"), (int, float)):  # rows in the ring: the next part's
            stats["taken"] = self._written() + stats.get("dropped", 0)
        base, rows0 = self.part_base
        args.update(stats=_since(stats, base), samples_written=self._written() - rows0,
                    elapsed_s=(self.t_end_ns - self.t_start_ns) / 1e9,
                    signals=[signal.Signals(s).name for s in self.signals.received],
                    signals_sent=list(self.signals.sent), duration_reached=self.timeout.reached)
        if self.returncode is not None:
            args["returncode"] = self.returncode
        errors = args.setdefault("errors", {})
        for what, why in self.session.failures.items():
            if what in self._producers:
                errors.setdefault(what, why)
        members = self._guard(getattr, self.sampler, "members", None)
        if members:  # process_tree: who held which slot when (Sampler.members)
            args["process_tree_members"] = members
        if self.failure is not None:
            args["failure"] = f"{type(self.failure).__name__}: {self.failure}"
        if self.parts is not None:
            args["part"] = dict(self.parts.summary(), recording_id=self.recording_id, first_sample=rows0,
                                next=next_part and os.path.basename(next_part))
        if self.stopped is not None:
            args["stopped_writing"] = self.stopped

    def _next_part(self) -> None:
        """--max-size: end the current part (each track's last values, the stop event), open the next (its head:
        the start event at the last row's time, so every row after it is in it), remove the oldest parts over the
        size. A failure stops the writing (the command runs on)."""
        parts, sink = self.parts, self.sink
        next_part = parts.path(parts.index + 1)
        self._guard(sink.end_file)
        args = self.session.stop_args()
        self._stop_args(args, next_part)
        self._guard(sink.close, args)
        self._guard(parts.finished)
        if self.failure is not None:
            return
        self.part_base = ({k: self.stats[k] for k in PART_STATS if k in self.stats}, self._written())
        try:
            self.out = parts.next()
            self.writer = sink.writer = self._writer()
        except (CLIError, OSError) as e:  # e.g. the folder went away
            self.failure = e
            return
        sink.stats_base = self.part_base[0]
        self.output = self.status.path = self.out.path
        parts.prune()
        at = sink.builder.last_ns or time.time_ns()
        sink.write_events([e._replace(t_ns=at, args=dict(e.args, part=dict(e.args["part"], index=parts.index)))
                           if e.name == START_EVENT else e for e in sink.head])

    def _check_space(self) -> None:
        """The free-space floor (--min-free): below it, stop the session and end the trace there (whole), say so
        once; the command runs on."""
        low = self.guard.low()
        if low is None:
            return
        avail, floor = low
        self.stopped = {"reason": "low disk space", "available_bytes": avail, "min_free_bytes": floor,
                        "folder": self.guard.folder}
        self._stop()
        self._guard(self.status.clear)
        print(f"{PROG}: stopped writing {self.output}: {human_bytes(avail)} available on its file system, under "
              f"--min-free {human_bytes(floor)}; the command runs on, unrecorded", file=sys.stderr, flush=True)

    def _conclude(self) -> int:
        """The closing line, waiting for a command still running, and the exit status."""
        failure, output, child, stats = self.failure, self.output, self.child, self.stats
        if failure is not None:
            print(f"{PROG}: recording stopped early: {type(failure).__name__}: {failure}; the trace is incomplete "
                  f"(run 'sysprof repair {output}' if it is not closed)", file=sys.stderr, flush=True)
        if child is not None and self.returncode is None:  # the recording failed: still wait for the command
            self.returncode = _wait_child(child, self.signals, self.timeout)
        if not self.quiet and failure is None and self.session is not None:
            written, dropped = self._written(), int(stats.get("dropped", 0))
            elapsed = (self.t_end_ns - self.t_start_ns) / 1e9
            if self.parts is not None:
                kept = self.parts.kept
                size = sum(n for _, _, n in kept)
                if self.parts.index > 1:
                    names = kept[0][0] if len(kept) == 1 else f"{kept[0][0]} .. {kept[-1][0]}"
                    output = f"{names} ({len(kept)} of {self.parts.index} parts kept under --max-size)"
            else:
                size = os.path.getsize(output) if os.path.exists(output) else self.writer.bytes_written
            print(f"{PROG}: wrote {output}: {written:,} samples in {elapsed:.1f} s "
                  f"({written / elapsed if elapsed > 0 else 0:.0f}/s), {dropped:,} dropped"
                  f"{' (the ring was full: raise --capacity)' if dropped else ''}, "
                  f"{int(stats.get('missed_deadlines', 0)):,} missed deadlines, {human_bytes(size)}"
                  f"{'; writing stopped early: low disk space' if self.stopped is not None else ''}",
                  file=sys.stderr, flush=True)
            self._warn_missed(stats, elapsed, live=False)
        if child is not None and _exit_status(self.returncode) != 0:
            return _exit_status(self.returncode)  # the command's failure comes first
        return 1 if failure is not None or self.stopped is not None else 0

    def _warn_missed(self, stats, elapsed: float, live: bool) -> None:
        """Warn when more than MISSED_SHARE_WARN of the deadlines were missed (--interval shorter than this machine
        samples): once while recording, again in the closing summary."""
        line = missed_deadlines_line(stats, self.args.interval, elapsed, live)
        if line is not None:
            self.status.clear()
            _warn(line, self.quiet)
            self.missed_warned = True


def missed_deadlines_line(stats, interval: float, elapsed: float, live: bool = False):
    """The warning about missed sampling deadlines, or None: more than MISSED_SHARE_WARN of at least
    MISSED_MIN_TICKS deadlines missed. The samples' mean spacing (``elapsed`` / taken) and the sampler's cost of a
    sample say what this machine does; the suggested interval is that spacing rounded up to 1, 2 or 5."""
    try:
        taken, missed = int(stats.get("taken", 0)), int(stats.get("missed_deadlines", 0))
    except (TypeError, ValueError):
        return None
    ticks = taken + missed
    if ticks < MISSED_MIN_TICKS or taken <= 0 or missed <= MISSED_SHARE_WARN * ticks:
        return None
    spacing = elapsed / taken if elapsed > 0 else interval
    cost = stats.get("sample_ns_mean")
    costs = f", each taking {format_seconds(cost / 1e9)}" if isinstance(cost, (int, float)) and cost > 0 else ""
    so_far = " so far" if live else ""
    return (f"{missed / ticks:.0%} of the sampling deadlines{so_far} were missed ({missed:,} of {ticks:,}): "
            f"--interval {format_seconds(interval)} is shorter than this machine samples (a sample every "
            f"{format_seconds(spacing)} on average{costs}); try --interval {_round_up_time(max(spacing, interval))}")


def _round_up_time(seconds: float) -> str:
    """``seconds`` rounded up to 1, 2 or 5 of a decade, as a ``--interval`` value (``20us``, ``5ms``, ``1s``)."""
    step = round_up_125(seconds)
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if step >= scale * (1 - 1e-9):
            return f"{step / scale:.3g}{unit}"
    return f"{step / 1e-9:.3g}ns"


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



def _decimals(channels, sampler) -> list:
    """The decimals each channel is written to (``registry.decimals_of`` at its source's interval)."""
    intervals = dict(getattr(sampler, "intervals", None) or {})
    return [decimals_of(c, intervals.get(source_of(c), sampler.interval)) for c in channels]


def _marker_receiver():
    """The markers' receiver for a command (sysprof.markers), or None where its directory cannot be made."""
    try:
        return MarkerReceiver()
    except OSError:
        return None


#: the sampler's statistics a part's stop event counts since the part's start: TraceSink's COUNTED_STATS (its
#: stats counter's) and the sampling threads' CPU
PART_STATS = COUNTED_STATS + ("cpu_seconds_total",)


def _since(stats: dict, base: dict) -> dict:
    """``stats`` with the PART_STATS counted from ``base`` (the values at a part's start)."""
    return {k: v - base[k] if k in PART_STATS and k in base and isinstance(v, (int, float)) else v
            for k, v in stats.items()}
