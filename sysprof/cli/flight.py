"""``sysprof record --flight WINDOW -o DIR -- COMMAND``: no full-rate trace of the whole run; the recorder keeps the
last WINDOW at full rate (:class:`sysprof.flight.FlightRecorder`) and writes ``DIR/flight-<UTC>-<trigger>.json``
around each anomaly: a slow step, a GPU XID, a clocks-event reason turning on, SIGUSR1 to the recorder, or
``sysprof.dump(reason)`` in the command. One line per dump on stderr. ``--flight-trace [EVERY]`` adds
``DIR/trace.json.gz``, the whole run decimated to a row per EVERY (the recorder writes it).

:class:`FlightRecording` is ``record``'s recording (:class:`sysprof.cli.record._Recording`: the sampler, the
command, the signals, the markers, the loop) with the trace file's sink replaced by the flight recorder's
(:class:`sysprof.flight.FlightSink`): the rows and the session's events go to it, not to a writer."""
from __future__ import annotations

import collections
import os
import signal
import sys
import time

from ..report import human_bytes
from .child import _resolve_command
from .common import PROG, CLIError, parse_size, parse_time
from .output import DEFAULT_MIN_FREE
from .record import _Recording


def add_flight_flags(parser) -> None:
    """``record``'s flight recorder options."""
    from ..flight import DEFAULT_STEP_PATTERNS, DEFAULT_TRACE_EVERY_S, FlightOptions

    d = FlightOptions()
    g = parser.add_argument_group("flight recorder (instead of a trace of the whole run)")
    g.add_argument("--flight", type=parse_time, metavar="WINDOW",
                   help="keep the last WINDOW (e.g. 30s) of samples and markers at full rate in memory and write "
                        "-o DIR/flight-<UTC time>-<trigger>.json (DIR default: the current directory) around each "
                        "anomaly, 2/3 of WINDOW before it and 1/3 after: a step that takes --flight-step-factor "
                        "times the median of the last 100 (spans named by --flight-step), a GPU XID, a "
                        "clocks-event reason turning on (not idle), SIGUSR1 to sysprof, sysprof.dump(reason) in "
                        "the command. No full-rate trace of the whole run (--flight-trace: a decimated one); one "
                        "line per dump on stderr")
    g.add_argument("--flight-gap", type=parse_time, default=d.min_gap_s, metavar="TIME",
                   help=f"at least this long between two dumps' triggers (default {d.min_gap_s:g}s)")
    g.add_argument("--flight-max", type=int, default=d.max_dumps, metavar="N",
                   help=f"at most N dumps (default {d.max_dumps})")
    g.add_argument("--flight-max-size", type=parse_size, default=d.max_bytes, metavar="SIZE",
                   help=f"at most SIZE of dumps together (default {d.max_bytes >> 20}M); the dump that "
                        "reaches it is cut there")
    g.add_argument("--flight-memory", type=parse_size, default=d.memory_bytes, metavar="SIZE",
                   help=f"the window's memory cap (default {d.memory_bytes >> 20}M): 8 x (1 + channels) bytes "
                        "a sample; past it the window is shorter, and sysprof says so")
    g.add_argument("--flight-step", action="append", metavar="GLOB",
                   help=f"the step spans' names (repeatable; default {', '.join(DEFAULT_STEP_PATTERNS)})")
    g.add_argument("--flight-step-factor", type=float, default=d.step_factor, metavar="K",
                   help=f"a step is slow past K times the median of the last 100 of its name (default "
                        f"{d.step_factor:g}; once {d.min_steps} steps of that name were seen)")
    g.add_argument("--flight-trace", nargs="?", type=parse_time, const=DEFAULT_TRACE_EVERY_S, metavar="EVERY",
                   help=f"also write -o DIR/trace.json.gz, a trace of the whole run at one row per EVERY "
                        f"(default {DEFAULT_TRACE_EVERY_S * 1e3:g}ms; put '--' before the command): totals as they "
                        f"were at each row, rates and gauges as their time-weighted mean over it, with the "
                        f"markers, XIDs, interval changes and a 'sysprof flight' instant at each dump; "
                        f"'report' reads it like any trace")
    g.add_argument("--flight-trace-max-size", type=parse_size, default=d.trace_max_bytes, metavar="SIZE",
                   help=f"with --flight-trace: the trace ends, closed, at SIZE on disk (default "
                        f"{d.trace_max_bytes >> 20}M) or under the --min-free floor")


def flight_options(args):
    """The :class:`~sysprof.flight.FlightOptions` of ``record``'s arguments; CLIError for a bad one."""
    from ..flight import DEFAULT_STEP_PATTERNS, FlightOptionError, FlightOptions

    try:
        return FlightOptions(window_s=args.flight, min_gap_s=args.flight_gap, max_dumps=args.flight_max,
                             max_bytes=args.flight_max_size, memory_bytes=args.flight_memory,
                             step_patterns=tuple(args.flight_step or DEFAULT_STEP_PATTERNS),
                             step_factor=args.flight_step_factor, min_free=args.min_free or DEFAULT_MIN_FREE,
                             trace_every_s=args.flight_trace, trace_max_bytes=args.flight_trace_max_size)
    except FlightOptionError as e:
        raise CLIError(f"{_FLAGS.get(e.field, e.field)} {str(e).split(' ', 2)[2]}", status=2) from None


#: the record option of each FlightOptions field
_FLAGS = {"window_s": "--flight", "min_gap_s": "--flight-gap", "max_dumps": "--flight-max",
          "max_bytes": "--flight-max-size", "memory_bytes": "--flight-memory", "step_factor": "--flight-step-factor",
          "trace_every_s": "--flight-trace", "trace_max_bytes": "--flight-trace-max-size"}


class _Folder:
    """``-o DIR`` of a flight recording, in the place of the trace file (:class:`sysprof.cli.output._Output`'s
    interface): made if missing."""

    regular = True

    def __init__(self, path: str):
        self.path = path
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as e:
            raise CLIError(f"cannot make {path}: {e.strerror or e}") from None
        if not os.access(path, os.W_OK | os.X_OK):
            raise CLIError(f"cannot write in {path}: permission denied")

    def truncate(self) -> None:
        pass

    def discard(self) -> None:
        pass

    def close(self) -> None:
        pass


class FlightRecording(_Recording):
    """``record --flight``: the session's sink is a :class:`~sysprof.flight.FlightRecorder` (its dumps' head the
    one ``record`` would write); SIGUSR1 triggers a dump (its handler sets a flag)."""

    @staticmethod
    def preflight(args, command) -> None:
        if args.max_size is not None:
            raise CLIError("--flight writes dumps, not a trace: --max-size does not apply (see --flight-max-size)",
                           status=2)
        folder = args.output or "."
        if folder == "-":
            raise CLIError("--flight writes dumps into a folder; give -o DIR", status=2)
        if os.path.lexists(folder) and not os.path.isdir(folder):
            raise CLIError(f"with --flight, -o names a folder for the dumps; {folder} is not one", status=2)
        if command:
            _resolve_command(command)
        flight_options(args)

    def __init__(self, args, command):
        super().__init__(args, command)
        self.output = args.output or "."
        self.options = flight_options(args)
        self.flight = None
        self.lines = collections.deque()  # dump lines from the writer thread, printed by the loop
        self.usr1_ns = None

    def _open_output(self):
        return _Folder(self.output)

    def _writer(self):
        return None  # the dumps are the flight recorder's

    def start(self, *a, **kw) -> None:
        try:  # a flag only; restored with the other handlers (_Signals.restore)
            self.signals.old[signal.SIGUSR1] = signal.signal(signal.SIGUSR1, self._usr1)
        except (ValueError, OSError):  # not the main thread
            pass
        super().start(*a, **kw)

    def _usr1(self, signum, frame) -> None:
        if self.flight is not None:
            self.flight.signalled_ns = time.time_ns()  # taken at its next feed
        else:
            self.usr1_ns = time.time_ns()

    def _sink(self):
        from ..flight import FlightRecorder, FlightSink
        from ..trace.tracks import EventBuilder

        sampler, my_pid = self.sampler, self.my_pid
        builder = EventBuilder(tuple(sampler.channels), system_pid=my_pid, process_pid=self._process_pid())
        self.flight = FlightRecorder(
            self.output, tuple(sampler.channels), sampler.interval, self.options, float_ts=self.float_ts, pid=my_pid,
            process_pid=next((pid for _, pid, _, _ in builder.groups if pid != my_pid), None),
            stop_args=lambda: {k: v for k, v in self.session.stop_args().items() if k in ("stats", "errors")},
            notify=self.lines.append)
        self.flight.signalled_ns, self.usr1_ns = self.usr1_ns, None
        if self.flight.cut and not self.quiet:
            print(f"{PROG}: --flight: {self.flight.cut}", file=sys.stderr, flush=True)
        return FlightSink(self.flight, head=lambda start: self._head(builder))

    def _written(self) -> int:
        return self.session.rows if self.session is not None else 0

    def _bytes_shown(self) -> int:
        return self.flight.bytes_written if self.flight is not None else 0

    def _drained(self, elapsed: float) -> None:
        super()._drained(elapsed)
        self._say()

    def _say(self) -> None:
        if self.lines:
            self.status.clear()
        while self.lines:
            line = self.lines.popleft()
            if not self.quiet:
                print(line, file=sys.stderr, flush=True)

    def _check_space(self) -> None:
        pass  # the flight recorder looks before and while it writes each dump; the recording goes on

    def _finish(self) -> None:
        super()._finish()  # the session's stop closes the flight recorder: the pending dumps written
        self._say()

    def _conclude(self) -> int:
        quiet, self.quiet = self.quiet, True  # record's closing line is a trace's: ours instead
        status = super()._conclude()
        flight = self.flight
        if not quiet and flight is not None and self.failure is None:
            elapsed = (self.t_end_ns - self.t_start_ns) / 1e9
            print(f"{PROG}: flight recorder: {self._written():,} samples in {elapsed:.1f} s, a "
                  f"{flight.window_s:g} s window in {human_bytes(flight.memory_bytes)}; {flight.summary()}",
                  file=sys.stderr, flush=True)
        return status
