"""Helpers of the Prometheus endpoint's tests (tests/test_prometheus*.py): a GET, the exposition parsed with
prometheus_client's parser, and a fake sampler of exact rows."""
from __future__ import annotations

import urllib.error
import urllib.request

import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from sysprof.sampling.sampler import Batch


def scrape(url: str):
    """(status, body) of a GET."""
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def parsed(text: str):
    """{family name: (type, {(sample name, labels as sorted tuple): value})}"""
    out = {}
    for fam in text_string_to_metric_families(text):
        out[fam.name] = (fam.type, {(s.name, tuple(sorted(s.labels.items()))): s.value for s in fam.samples})
    return out


class FakeSampler:
    """Stands in for sysprof.Sampler: ``rows`` (list of (ts_ns, values)) are handed out by the next drain(); no
    latest()."""

    def __init__(self, channels, devices=()):
        self.channels, self.devices, self.rows, self.interval = tuple(channels), list(devices), [], 0.001
        self.stats = {"taken": 0, "dropped": 0, "missed_deadlines": 0}

    def drain(self):
        rows, self.rows = self.rows, []
        self.stats["taken"] += len(rows)
        return Batch(np.array([t for t, _ in rows], dtype=np.int64),
                     np.array([v for _, v in rows], dtype=np.float64).reshape(len(rows), len(self.channels)),
                     self.channels)
