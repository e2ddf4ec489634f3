"""A Prometheus endpoint for sysprof's samples: ``/metrics`` through prometheus_client
(``pip install 'sysprof[prometheus]'``), in Prometheus names and base units.

:func:`serve` (``sysprof serve`` on the command line; ``SystemProfiler(prometheus_listen=...)`` in a Composer run)
and :class:`PrometheusEndpoint` (for a sampler of one's own). The modules: ``names`` (channel -> family, the one
table), ``window`` (what a scrape sees of the millisecond rows: sliding-window extremes and histograms),
``collector`` (the prometheus_client Collector), ``endpoint`` (the endpoint, loopback by default), ``server``
(its HTTP server: one thread, bounded connections, a deadline on each request's head).
"""
from .endpoint import DEFAULT_LISTEN, PrometheusEndpoint, parse_listen, serve

__all__ = ["DEFAULT_LISTEN", "PrometheusEndpoint", "parse_listen", "serve"]
