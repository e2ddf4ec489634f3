"""The HTTP endpoint: ``/metrics`` in Prometheus' text format, nothing else.

``PrometheusEndpoint(sampler)`` serves a running :class:`sysprof.Sampler`; :func:`serve` makes the sampler too. The
address is loopback (``127.0.0.1:9464``) unless one is given: ``listen="0.0.0.0:9464"`` (every interface),
``"[::1]:9464"``, ``"9464"`` or ``":9464"`` (loopback, that port), port 0 (a free port: ``.port`` says which).
Every other path answers 404, a method other than GET and HEAD 405. One thread serves every connection
(:mod:`sysprof.prometheus.server`): at most ``max_connections`` are open, a request's head must arrive within
``header_timeout`` seconds, and only a complete request is answered (collected). Needs prometheus_client
(``pip install 'sysprof[prometheus]'``).
"""
from __future__ import annotations

import logging
import os
import re
import threading
import time
from typing import Any, Callable, Optional, Tuple

import numpy as np

from ..pipeline import Session, Sink
from .names import families
from .server import HEADER_TIMEOUT_S, MAX_CONNECTIONS, HTTPServer
from .window import DEFAULT_SLOTS, DEFAULT_WINDOW_S, Window

__all__ = ["DEFAULT_LISTEN", "PrometheusEndpoint", "parse_listen", "require_prometheus_client", "serve"]

log = logging.getLogger(__name__)

DEFAULT_LISTEN = "127.0.0.1:9464"  # 9464: the port OpenTelemetry's Prometheus exporter made customary
LOOPBACK = "127.0.0.1"
FOLD_PERIOD_S = 0.5  # how often an endpoint that drains its sampler folds the rows in between scrapes


def require_prometheus_client() -> None:
    """ImportError with what to install when prometheus_client is missing."""
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        raise ImportError("the Prometheus endpoint needs prometheus_client: pip install 'sysprof[prometheus]'") from None


def parse_listen(listen: Any) -> Tuple[str, int]:
    """``(host, port)`` of a listen address (see the module); ValueError naming it otherwise."""
    text = str(listen).strip() if isinstance(listen, (str, int)) and not isinstance(listen, bool) else ""
    m = re.fullmatch(r"(?:(?:\[([0-9A-Fa-f:.]+)\]|([^:\[\]\s]*)):)?(\d{1,5})", text)
    if m is None:
        raise ValueError(f"listen must be HOST:PORT, [IPV6]:PORT or PORT, got {listen!r}")
    host, port = m.group(1) or m.group(2) or LOOPBACK, int(m.group(3))
    if port > 65535:
        raise ValueError(f"listen: port must be 0-65535, got {port}")
    return host, port


def _only_metrics(app: Callable) -> Callable:
    def guarded(environ, start_response):
        if environ.get("PATH_INFO") != "/metrics":
            start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
            return [b"sysprof serves /metrics only\n"]
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            start_response("405 Method Not Allowed", [("Content-Type", "text/plain; charset=utf-8"),
                                                      ("Allow", "GET, HEAD")])
            return [b"GET /metrics\n"]
        return app(dict(environ, REQUEST_METHOD="GET"), start_response)  # HEAD: the server sends no body
    return guarded


class PrometheusEndpoint(Sink):
    """Serves ``sampler``'s channels at ``http://LISTEN/metrics`` on a thread of its own, until :meth:`stop`
    (or the end of a ``with`` block). A sink of a recording session (:class:`sysprof.pipeline.Session`): each
    chunk's rows are folded into the window (:meth:`take`, :meth:`feed`).

    Args:
        sampler: a :class:`sysprof.Sampler`, running or started later (``latest()`` gives each scrape the
            newest row).
        listen: the address (see the module); loopback unless a host is given.
        window: seconds of the ``_max`` / ``_min`` window (> 0); ``slots`` sub-windows (1-3600).
        drain: True: the endpoint drains the sampler, a session of its own with this endpoint its sink
            (:attr:`session`: every 0.5 s on its thread, and at each scrape); False: the endpoint is a sink of
            its owner's session (``SystemProfiler``'s), or whoever drains passes each batch to :meth:`feed`.
        own_sampler: :meth:`stop` also stops the sampler (:func:`serve`'s).
        max_connections: connections open at once (1-10000); a new one closes the oldest still sending its
            request.
        header_timeout: seconds a request's line and headers may take in all (> 0); the connection is then closed.

    Raises:
        ImportError: prometheus_client is missing. ValueError: a bad ``listen``, ``window``, ``slots``,
            ``max_connections`` or ``header_timeout``.
        OSError: the address cannot be bound (in use, not this host's).
    """

    name = "prometheus"

    def __init__(self, sampler: Any, *, listen: Any = DEFAULT_LISTEN, window: float = DEFAULT_WINDOW_S,
                 slots: int = DEFAULT_SLOTS, drain: bool = True, own_sampler: bool = False,
                 max_connections: int = MAX_CONNECTIONS, header_timeout: float = HEADER_TIMEOUT_S,
                 clock: Callable[[], int] = time.time_ns) -> None:
        require_prometheus_client()
        from prometheus_client import CollectorRegistry, make_wsgi_app

        from .collector import SysprofCollector

        host, port = parse_listen(listen)
        if isinstance(window, bool) or not isinstance(window, (int, float)) or not 0 < window <= 86400:
            raise ValueError(f"window must be a number of seconds in (0, 86400], got {window!r}")
        if isinstance(slots, bool) or not isinstance(slots, int) or not 1 <= slots <= 3600:
            raise ValueError(f"slots must be a whole number in [1, 3600], got {slots!r}")
        if isinstance(max_connections, bool) or not isinstance(max_connections, int) or \
                not 1 <= max_connections <= 10000:
            raise ValueError(f"max_connections must be a whole number in [1, 10000], got {max_connections!r}")
        if isinstance(header_timeout, bool) or not isinstance(header_timeout, (int, float)) or \
                not 0 < header_timeout <= 3600:
            raise ValueError(f"header_timeout must be a number of seconds in (0, 3600], got {header_timeout!r}")
        self.sampler, self.drains, self._own = sampler, bool(drain), bool(own_sampler)
        self.families = families(tuple(sampler.channels), getattr(sampler, "devices", ()))
        self._divisor = np.ones(len(sampler.channels))
        hist = {}  # column -> the top of its range: 1, or the CPUs for a CPU time in cores
        cores = float(os.cpu_count() or 1)
        for fam in self.families:
            self._divisor[fam.columns] = fam.metric.divisor
            if fam.metric.ratio and fam.metric.type == "gauge" and fam.metric.label != "cpu":
                top = cores if fam.metric.pattern.endswith("/cpu_percent") else 1.0  # csrc/engine/ranges.cpp's rule
                hist.update((col, top) for col in fam.columns)
        cols = sorted(hist)
        self.window = Window(len(sampler.channels), float(window), slots, cols, clock, [hist[c] for c in cols])
        self._last: Optional[np.ndarray] = None
        registry = CollectorRegistry(auto_describe=False)
        registry.register(SysprofCollector(self, self.families, self.window, getattr(sampler, "interval", None)))
        self.registry = registry
        self._server = HTTPServer(host, port, _only_metrics(make_wsgi_app(registry)),
                                  max_connections=max_connections, header_timeout=header_timeout)
        self.host, self.port = host, int(self._server.server_address[1])
        self._stop = threading.Event()
        self.session: Optional[Session] = None
        if self.drains:
            self.session = Session(sampler, [self], period=FOLD_PERIOD_S, name="sysprof-prometheus-fold")
            self.session.start(thread=True, start_sampler=False)
        self._thread = threading.Thread(target=self._server.serve_forever, name="sysprof-prometheus", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def take(self, chunk: Any) -> None:
        """A session's chunk: its rows folded (:meth:`feed`)."""
        self.feed(chunk.batch)

    def feed(self, batch: Any) -> None:
        """Folds a drained :class:`sysprof.Batch` into the window and histograms (any thread; never raises)."""
        try:
            if len(batch):
                values = batch.values / self._divisor
                self.window.fold(batch.timestamps_ns, values)
                self._last = values[-1]
        except Exception:  # noqa: BLE001 - the caller's drain goes on
            log.exception("sysprof prometheus: a batch could not be folded")

    def refresh(self) -> None:
        """Drains the sampler into the window (an endpoint that drains: its session's pump; a no-op otherwise)."""
        session = self.session
        if session is not None:
            session.pump()

    def newest_row(self) -> Optional[np.ndarray]:
        """The newest row, scaled: the sampler's ``latest()``, else the newest row fed."""
        latest = getattr(self.sampler, "latest", None)
        row = latest() if latest is not None else None
        return self._last if row is None else row.array / self._divisor

    def sampler_stats(self) -> dict:
        return dict(self.sampler.stats)

    def stop(self) -> None:
        """Stops serving (and the sampler, when the endpoint made it). Idempotent."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._server.shutdown()
        self._thread.join()
        if self.session is not None:
            self.session.stop(stop_sampler=self._own)
        elif self._own:
            self.sampler.stop()

    def __enter__(self) -> "PrometheusEndpoint":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"PrometheusEndpoint({self.url!r}, {len(self.families)} families, window={self.window.window:g}s)"


def serve(listen: Any = DEFAULT_LISTEN, *, interval: float = 0.001, window: float = DEFAULT_WINDOW_S,
          **sampler_kwargs: Any) -> PrometheusEndpoint:
    """Starts a :class:`sysprof.Sampler` (``interval`` and ``sampler_kwargs``: its arguments, sources included)
    and a :class:`PrometheusEndpoint` on ``listen`` that drains it; returns the endpoint, whose ``stop()`` (or
    ``with`` block) stops both::

        with sysprof.serve("127.0.0.1:9464", gpu=True) as ep:
            train()  # Prometheus scrapes ep.url
    """
    require_prometheus_client()
    from ..sampling.sampler import Sampler

    sampler = Sampler(interval=interval, **sampler_kwargs)
    sampler.start()
    try:
        return PrometheusEndpoint(sampler, listen=listen, window=window, drain=True, own_sampler=True)
    except BaseException:
        sampler.stop()
        raise
