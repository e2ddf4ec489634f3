"""``sysprof serve``: sample the host and serve ``/metrics`` to Prometheus until SIGINT/SIGTERM (or --duration)."""
from __future__ import annotations

import os
import signal
import sys
import threading

from .common import PROG, CLIError, _warn, parse_interval, parse_time
from .sources import (add_interval_flags, add_source_flags, check_targets, devices_from_args, intervals_from_args,
                      _sources_from_args, sampler_kwargs, warn_problems)

DEFAULT_INTERVAL = "1ms"
DEFAULT_WINDOW = "15s"


def add_serve_parser(sub) -> None:
    """The ``serve`` sub-parser (its source flags are ``record``'s, from the registry)."""
    from ..prometheus.endpoint import DEFAULT_LISTEN

    s = sub.add_parser("serve", help="serve the samples to Prometheus at /metrics (needs prometheus_client)",
                       description="Sample system metrics and serve them at http://LISTEN/metrics in Prometheus' "
                                   "text format (Prometheus names and base units: sysprof_memory_used_bytes, "
                                   "sysprof_disk_read_bytes_total{device=...}, ratios for percents), with each "
                                   "gauge's _max and _min over a sliding --window and histograms of the "
                                   "ratios' samples, so a scrape every 15 s still sees a 20 ms burst. Only "
                                   "/metrics is served (404 elsewhere). Runs until SIGINT or SIGTERM (exit "
                                   "status 0). Needs prometheus_client: pip install 'sysprof[prometheus]'.")
    s.add_argument("--listen", default=DEFAULT_LISTEN, metavar="ADDR",
                   help=f"HOST:PORT, [IPV6]:PORT or PORT (loopback); default {DEFAULT_LISTEN}, loopback only: "
                        "give 0.0.0.0:PORT to be scraped from other hosts")
    s.add_argument("-i", "--interval", type=parse_interval, default=parse_time(DEFAULT_INTERVAL), metavar="TIME",
                   help=f"sampling interval; default {DEFAULT_INTERVAL}")
    s.add_argument("--window", type=parse_time, default=parse_time(DEFAULT_WINDOW), metavar="TIME",
                   help=f"the sliding window of the _max and _min gauges; default {DEFAULT_WINDOW}; at least the "
                        "scrape interval, so that no sample falls between two scrapes")
    s.add_argument("-d", "--duration", type=parse_time, metavar="TIME", help="stop after this long")
    add_source_flags(s)
    add_interval_flags(s, parse_time)
    s.add_argument("--pid", type=int, metavar="PID", help="the process followed by --process and --process-tree")
    s.add_argument("--backend", choices=("auto", "native", "psutil"), default="auto", help="sampler backend")
    s.add_argument("-q", "--quiet", action="store_true", help="no start line or warnings")
    s.set_defaults(func=cmd_serve)


def cmd_serve(args) -> int:
    try:
        from ..prometheus.endpoint import PrometheusEndpoint, parse_listen, require_prometheus_client

        require_prometheus_client()
        parse_listen(args.listen)
    except (ImportError, ValueError) as e:
        raise CLIError(str(e), status=2) from None
    target = args.pid is not None
    check_targets(args, target)
    if target and not os.path.exists(f"/proc/{args.pid}"):
        raise CLIError(f"no such process: {args.pid}")
    sources = _sources_from_args(args, target, pid_given=target)
    kwargs = dict(sampler_kwargs(sources), interval=args.interval, backend=args.backend,
                  intervals=intervals_from_args(args, sources), devices=devices_from_args(args))
    if target:
        kwargs["pid"] = args.pid
    import sysprof

    try:
        sampler = sysprof.Sampler(**kwargs)
    except (ValueError, TypeError) as e:
        raise CLIError(f"cannot start the sampler: {e}") from None
    warn_problems(sampler, args, args.quiet)
    done = threading.Event()
    saved = {sig: signal.signal(sig, lambda *_: done.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        sampler.start()
        try:
            endpoint = PrometheusEndpoint(sampler, listen=args.listen, window=args.window, drain=True)
        except OSError as e:
            raise CLIError(f"cannot listen on {args.listen}: {e.strerror or e}") from None
        with endpoint:
            if not args.quiet:
                print(f"{PROG}: serving {endpoint.url} ({len(sampler.channels)} channels, "
                      f"{len(endpoint.families)} families, window {args.window:g} s)", file=sys.stderr, flush=True)
            done.wait(args.duration)
    finally:
        sampler.stop()
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    if not args.quiet and sampler.stats.get("dropped"):
        _warn(f"{sampler.stats['dropped']} rows dropped by a full ring", args.quiet)
    return 0
