"""Reading a sysprof trace back: per-channel series, time-weighted statistics, the report table and plots.

Used by ``sysprof report``; independent of the command line (errors are :class:`ReportError`).
Counters hold their value until the next event (Chrome's step semantics), so statistics weigh
each value by how long it held. A counter event is a snapshot of its group: a key that the group has
elsewhere but that is missing from an event (sysprof leaves NaN out) is unknown from that event until
the group's next event, and that time counts for no value. Units are those the trace declares (its
``sysprof units`` metadata event), inferred from the channel names only in traces without one.

Besides ``sysprof record`` traces, traces of ``sysprof.profile()`` / ``JSONTraceHandler`` (Composer's
layout: ``memory/virtual`` {used_gb}, ``disk/<dev>/<field>`` {<field>}, no recording metadata) are read.

Modules: ``model`` (a trace read into series), ``units``, ``stats`` (time-weighted statistics, the summary, the
sampling windows), ``names`` (Composer's channel names mapped back to the sampler's), ``phases`` (per-phase
attribution, ``report --by``), ``verdict`` (what was saturated or starved in the largest phases), ``table``
(number formatting, the printed table, verdict and phases), ``plot`` (matplotlib).
"""
from __future__ import annotations

from ..sampling.registry import source_available  # noqa: F401
from ..trace.schema import START_EVENT, STATS_COUNTER, STOP_EVENT, join_channel, split_channel  # noqa: F401
from .model import Instant, ReportError, Span, TraceData  # noqa: F401
from .plot import MAX_LINES, MAX_PANELS, _plot_selection, _smoothed, plot_trace, require_matplotlib  # noqa: F401
from .phases import (WHOLE_TRACE, ChannelPhase, PhaseStats, by_phase, match_spans, no_match_message,  # noqa: F401
                     phases_frame, phases_json, whole_trace)
from .stats import GAP_FACTOR, channel_filter, jsonable, sampled_windows, summarize, weighted_stats  # noqa: F401
from .table import (_is_boring, format_seconds, format_si, format_value, human_bytes, print_phases,  # noqa: F401
                    print_table, print_verdict, problem_lines, short_problem, table_layout)
from .verdict import KEY_CHANNELS, is_key_channel, verdict  # noqa: F401
from .units import infer_unit, unit_of  # noqa: F401
