"""One recording pipeline: the sampler -> one drain loop (:class:`Session`) -> a typed stream (:class:`Chunk`:
the sampler's rows and :class:`~sysprof.trace.events.Event` values) -> sinks (:class:`Sink`).

Every recorder in sysprof assembles a session instead of owning a loop: ``sysprof record`` (a trace sink, and the
markers' producer), the trainer callbacks (a trace sink or the flight recorder, phases, summaries),
``SystemProfiler`` (Composer's profiler as a sink) and ``serve`` (the Prometheus window as a sink).
"""
from .session import Chunk, Session, Sink, Start

__all__ = ["Chunk", "Session", "Sink", "Start"]
