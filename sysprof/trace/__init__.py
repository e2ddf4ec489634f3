"""Trace files: the Chrome trace-event writer, reader and repairer (``chrome``), the trace's vocabulary
(``schema``), the track model that turns sampler rows into counter events for every sink (``tracks``) and rank
merging (``merge``)."""
