#!/usr/bin/env python3
"""What deriving at drain would cost: design (a) of the registry issue (docs/architecture.md), the rules
vectorised with numpy over each drained batch, per row. Compare with `drain() per row` of compare_builds.py
(the copy alone, ~2-3 us). A batch is 0.2 s at 1 kHz (200 rows) shaped like the --all host set: 38
per-device counters, 9 CPUs x 8 tick modes with hold-last, 12 trailing-window time counters."""
import statistics
import time

import numpy as np

rng = np.random.default_rng(0)
R = 200
n_counter = 2 * 7 + 3 * 8        # 2 disks x 7 counters, 3 nics x 8
n_ticks_cpu = 9 * 8              # aggregate + 8 cpus, 8 modes each
n_trailing = 12                  # process/tree/cgroup cpu, 6 psi totals...
mono = np.cumsum(np.full(R, 1_000_000, dtype=np.int64)) + 10**12
counters = np.cumsum(rng.integers(0, 5000, size=(R, n_counter), dtype=np.uint64), axis=0)
ticks = np.cumsum(rng.integers(0, 2, size=(R, n_ticks_cpu), dtype=np.uint64), axis=0)
trail = np.cumsum(rng.integers(0, 10_000, size=(R, n_trailing), dtype=np.uint64), axis=0)
carry_c = counters[0].copy(); carry_t = ticks[0].copy(); carry_mono = mono[0] - 1_000_000
hist_mono = mono[:20]; hist_tr = trail[:20]

def derive():
    # counters: unwrap 32-bit, reset -> 0, rate
    prev = np.vstack([carry_c, counters[:-1]])
    d = counters.astype(np.float64) - prev.astype(np.float64)
    wrap = (d < 0) & (prev < 2**32)
    d = np.where(d >= 0, d, np.where(wrap, d + 2.0**32, 0.0))
    dt = np.diff(np.concatenate(([carry_mono], mono))) * 1e-9
    rates = d / dt[:, None]
    totals = counters.astype(np.float64)
    # cpu ticks: per cpu total, busy, percent with hold-last forward fill
    prevt = np.vstack([carry_t, ticks[:-1]])
    dtk = np.where(ticks >= prevt, ticks - prevt, 0).astype(np.float64).reshape(R, 9, 8)
    tot = dtk.sum(axis=2)
    busy = tot - dtk[:, :, 3] - dtk[:, :, 4]
    with np.errstate(invalid="ignore", divide="ignore"):
        pct = np.where(tot > 0, 100.0 * busy / tot, np.nan)
        modes = np.where(tot[:, :, None] > 0, 100.0 * dtk / tot[:, :, None], np.nan)
    # hold last: forward fill NaN along rows
    idx = np.where(~np.isnan(pct), np.arange(R)[:, None], 0)
    np.maximum.accumulate(idx, axis=0, out=idx)
    pct = pct[idx, np.arange(9)]
    idx2 = np.where(~np.isnan(modes), np.arange(R)[:, None, None], 0)
    np.maximum.accumulate(idx2, axis=0, out=idx2)
    modes = np.take_along_axis(modes, idx2, axis=0)
    # trailing 20 ms window rate
    allm = np.concatenate([hist_mono, mono]); allv = np.vstack([hist_tr, trail])
    j = np.searchsorted(allm, mono - 20_000_000, side="right") - 1
    j = np.clip(j, 0, None)
    dv = trail.astype(np.float64) - allv[j].astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        tr = np.where(dv >= 0, dv, 0) * 1e9 / (mono - allm[j])[:, None]
    return np.hstack([totals, rates, pct, modes.reshape(R, -1), tr])

for _ in range(50): derive()
ts = []
for _ in range(7):
    t0 = time.perf_counter_ns()
    for _ in range(200): derive()
    ts.append((time.perf_counter_ns() - t0) / 200 / R)
q = statistics.quantiles(ts, n=4)
print(f"vectorised derive per row: median {statistics.median(ts):.0f} ns [IQR {q[0]:.0f} .. {q[2]:.0f}], n=7 x 200 batches of {R} rows")
