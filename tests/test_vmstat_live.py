"""vmstat on the live /proc against an independent reader at the same moment: every total lies between
the kernel's values read just before and just after the sample (they only grow)."""
import math
import os

import pytest

import sysprof

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/vmstat"), reason="no /proc/vmstat")

# channel -> the keys whose sum it is (the per-zone keys of kernels before 4.8 included)
ZONES = ("dma", "dma32", "normal", "high", "movable", "device")


def _read():
    with open("/proc/vmstat") as f:
        return {k: int(v) for k, v in (line.split() for line in f if line.strip())}


def _total(kv, key, zoned=False):
    keys = [key] + ([f"{key}_{z}" for z in ZONES] if zoned else [])
    found = [kv[k] for k in keys if k in kv]
    return sum(found) if found else None


def _expected(kv):
    refault_file = kv.get("workingset_refault_file", kv.get("workingset_refault"))
    return {
        "vmstat/pgfault_total": _total(kv, "pgfault"), "vmstat/pgmajfault_total": _total(kv, "pgmajfault"),
        "vmstat/pswpin_total": _total(kv, "pswpin"), "vmstat/pswpout_total": _total(kv, "pswpout"),
        "vmstat/pgscan_kswapd_total": _total(kv, "pgscan_kswapd", True),
        "vmstat/pgscan_direct_total": _total(kv, "pgscan_direct", True),
        "vmstat/pgsteal_kswapd_total": _total(kv, "pgsteal_kswapd", True),
        "vmstat/pgsteal_direct_total": _total(kv, "pgsteal_direct", True),
        "vmstat/oom_kill_total": _total(kv, "oom_kill"),
        "vmstat/workingset_refault_anon_total": _total(kv, "workingset_refault_anon"),
        "vmstat/workingset_refault_file_total": refault_file,
    }


def test_live_totals_lie_between_two_independent_reads():
    s = sysprof.Sampler(0.01, cpu=False, memory=False, disk=False, net=False, vmstat=True)
    assert "vmstat" not in s.errors, s.errors
    before = _expected(_read())
    row = s.sample()
    after = _expected(_read())
    assert row["vmstat/pgfault_total"] > 0  # every running system has faulted
    for ch, lo in before.items():
        hi = after[ch]
        if lo is None:
            assert math.isnan(row[ch]), ch  # this kernel has no such key
        else:
            assert lo <= row[ch] <= hi, (ch, lo, row[ch], hi)
    # rates since construction (its priming read): defined, and never negative for a counter that grows
    for ch in ("vmstat/pgfault_per_second", "vmstat/pgmajfault_per_second"):
        assert math.isfinite(row[ch]) and row[ch] >= 0, (ch, row[ch])
