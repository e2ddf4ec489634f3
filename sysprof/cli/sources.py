"""Which sources ``sysprof record`` samples, all read from the registry (``sysprof.sampling.registry.SOURCES``):
the source flags of ``--help``, ``--all``, the default set, the Sampler's keywords and which problems are
warned about. A source added to the registry gets its flag, its place in ``--all`` and in ``sysprof info``
with no change here."""
from __future__ import annotations

from ..sampling import registry
from ..sampling.registry import SOURCES, source_available
from .common import CLIError, _warn, int_in


def measures_target(spec) -> bool:
    """Whether a source measures the followed process itself (``SourceSpec.needs_target``: ``process``,
    ``process_tree``), so that sysprof's own would be meaningless: it needs a command or ``--pid``, and
    ``--all`` takes it only then. A source that only locates something through the pid (the pid's cgroup,
    where the command also runs) is sampled without one."""
    return spec.needs_target


def target_sources():
    """Names of the sources that measure the followed process (:func:`measures_target`), in registry order."""
    return tuple(name for name, spec in SOURCES.items() if measures_target(spec))


def pid_default_sources():
    """What ``record --pid P`` adds to the default set when no source is named (``SourceSpec.pid_default``)."""
    return tuple(n for n, s in SOURCES.items() if s.pid_default)


def _option_names():
    return tuple(opt.name for spec in SOURCES.values() for opt in spec.options)


def _number_options():
    """Names of the options that take a number (``process_tree_slots``), not a switch."""
    return {opt.name for spec in SOURCES.values() for opt in spec.options if not opt.is_switch}


def add_source_flags(parser) -> None:
    """The "sources" argument group: one flag per registry source and per source option, and ``--all``."""
    defaults = " ".join(SOURCES[n].flag for n in registry.DEFAULT_SOURCES)
    with_pid = " ".join(SOURCES[n].flag for n in pid_default_sources())
    g = parser.add_argument_group(f"sources (default: {defaults}" + (f"; with --pid also {with_pid})" if with_pid
                                                                     else ")"))
    for spec in SOURCES.values():
        help_text = f"{spec.help} ({spec.file})"
        if measures_target(spec):
            help_text += "; needs a command or --pid"
        elif spec.follows_pid:
            help_text += "; of --pid, else sysprof's (where COMMAND starts)"
        g.add_argument(spec.flag, dest=spec.name, action="store_true", help=help_text)
        for opt in spec.options:
            if opt.is_switch:
                g.add_argument(opt.flag, dest=opt.name, action="store_true", help=f"{opt.help} (implies {spec.flag})")
            else:
                g.add_argument(opt.flag, dest=opt.name, type=int_in(opt.lo, opt.hi), metavar="N", default=None,
                               help=f"{opt.help}; {opt.lo}-{opt.hi}, default {opt.default} (with {spec.flag})")
    targets = " and ".join(SOURCES[n].flag for n in target_sources())
    g.add_argument("--all", action="store_true",
                   help="every source" + (f" ({targets} when there is a command or --pid)" if targets else ""))
    g.add_argument("--devices", action="append", metavar="GLOB",
                   help="disks and network interfaces to record (repeatable): GLOB keeps the devices it matches "
                        "(then only those), '!GLOB' leaves them out, disk/GLOB or net/GLOB for one source; "
                        "default: all but loop*, ram*, zram* disks and lo, which a GLOB matching them brings "
                        "back ('*': every device). Quote the GLOB for the shell: --devices 'nvme*' "
                        "--devices '!net/docker*'")
    g.add_argument("--gpus", metavar="LIST",
                   help="GPUs to record with --gpu, in this order: comma-separated NVML indices, GPU-/MIG- UUIDs "
                        "(or prefixes) or PCI bus ids; 'all': every GPU. Default: those CUDA_VISIBLE_DEVICES "
                        "makes visible when it is set, else every GPU")


def interval_flag(spec) -> str:
    """``--interval-cpu``, ``--interval-process-tree``: the per-source interval flag of a registry source."""
    return "--interval-" + spec.flag[2:]


def add_interval_flags(parser, parse_time) -> None:
    """The "per-source intervals" argument group: one ``--interval-<source>`` flag per registry source."""
    g = parser.add_argument_group("per-source intervals (default: --interval)",
                                  "Each at least --interval, rounded to the nearest whole number of intervals. A "
                                  "sample is still taken every --interval; between two reads of a source it "
                                  "repeats that source's previous values (free in the changes-only trace).")
    for spec in SOURCES.values():
        g.add_argument(interval_flag(spec), dest="interval_" + spec.name, type=parse_time, metavar="TIME",
                       help=f"read {spec.flag} every TIME")
    if "gpu" in SOURCES:  # the GPU's own interval (sysprof/sampling/gpu_interval.py)
        g.add_argument("--gpu-interval", dest="interval_gpu", type=parse_time, metavar="TIME",
                       help="the same as --interval-gpu; default 10 ms (NVML's fastest metrics step about every "
                            "10-20 ms), or --interval if longer")


def intervals_from_args(args, chosen) -> dict:
    """The Sampler's ``intervals`` (source name -> seconds) of the ``--interval-<source>`` flags given. A flag for a
    source not recorded, or shorter than ``--interval``, is an error."""
    out = {}
    for name, spec in SOURCES.items():
        value = getattr(args, "interval_" + name, None)
        if value is None:
            continue
        if not chosen.get(name):
            raise CLIError(f"{interval_flag(spec)} is given but {spec.flag} is not recorded", status=2)
        if value < args.interval * (1 - 1e-9):
            raise CLIError(f"{interval_flag(spec)} {value:g} s is shorter than --interval {args.interval:g} s",
                           status=2)
        out[name] = value
    return out


def _sources_from_args(args, have_target: bool, pid_given: bool = False):
    """``{name: on}`` for every registry source and source option, as the flags, ``--all`` or the defaults say."""
    names = tuple(SOURCES) + _option_names()
    numbers = _number_options()
    chosen = {n: bool(getattr(args, n, False)) for n in names if n not in numbers}
    if args.all:
        chosen = {n: True for n in names if n not in numbers}
        chosen.update({n: have_target for n in target_sources()})
    elif not any(chosen.values()):
        chosen.update({n: True for n in registry.DEFAULT_SOURCES})
        chosen.update({n: pid_given for n in pid_default_sources()})  # following a --pid: its numbers are the point
    # a number option (--process-tree-slots N) shapes its source, it does not switch it on
    chosen.update({n: getattr(args, n, None) for n in numbers})
    for name, spec in SOURCES.items():
        if any(chosen[opt.name] for opt in spec.options if opt.is_switch):
            chosen[name] = True  # a switch implies its source
    return chosen


def gpus_from_args(args):
    """The Sampler's ``gpus`` of ``--gpus`` (None: not given); a malformed entry is an error."""
    from ..sampling.gpus import check_gpus

    if not getattr(args, "gpus", None):
        return None
    try:
        check_gpus(args.gpus, "--gpus")
    except ValueError as e:
        raise CLIError(str(e), status=2) from None
    return "all" if args.gpus.strip() == "all" else [g.strip() for g in args.gpus.split(",")]


def devices_from_args(args):
    """The Sampler's ``devices`` of the ``--devices`` flags (None: not given); a malformed glob is an error."""
    from ..sampling.devices import check_devices

    if not getattr(args, "devices", None):
        return None
    try:
        return list(check_devices(args.devices, "--devices"))
    except ValueError as e:
        raise CLIError(str(e), status=2) from None


def requested(chosen):
    """The source names switched on in ``chosen`` (options left out)."""
    return [name for name in SOURCES if chosen.get(name)]


def sampler_kwargs(chosen) -> dict:
    """The Sampler keywords (one per source and option) of a selection: a number option as given (None: its
    default)."""
    numbers = _number_options()
    return {n: chosen.get(n) if n in numbers else bool(chosen.get(n)) for n in tuple(SOURCES) + _option_names()}


def check_targets(args, have_target: bool) -> None:
    """A source that measures the followed process, named by its flag without a command or --pid, is an error."""
    for name in target_sources():
        if getattr(args, name, False) and not have_target:
            raise CLIError(f"{SOURCES[name].flag} follows a command (after --) or --pid PID; none given", status=2)


def _require_a_source(sampler, sources, follow_child: bool) -> None:
    """Raise CLIError when none of the requested ``sources`` (name -> bool) gives the sampler a channel; the
    command's own process (``follow_child``) is sampled later, by a second sampler, so it counts as there."""
    asked = requested(sources)
    if follow_child and any(name in asked for name in target_sources()):
        return
    channels = tuple(sampler.channels)
    if any(source_available(src, channels) for src in asked):
        return
    errors = dict(getattr(sampler, "errors", {}))
    why = "; ".join(f"{src}: {errors.get(src, 'no channels')}" for src in asked)
    raise CLIError(f"no requested source is available: {why}")


def warn_problems(sampler, args, quiet: bool) -> None:
    """Warn about each of the sampler's problems. ``--all`` takes what this machine has: a source it added
    beyond the default set, not named by its own flag, is not warned about; a default source's problem, or a
    named one's, is news."""
    for src, why in sorted(getattr(sampler, "errors", {}).items()):
        if args.all and src in SOURCES and src not in registry.DEFAULT_SOURCES and not getattr(args, src, False):
            continue
        _warn(f"{src}: {why}", quiet)
