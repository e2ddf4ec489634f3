"""Trace files: the Chrome trace-event writer, reader and repairer (``chrome``)."""
