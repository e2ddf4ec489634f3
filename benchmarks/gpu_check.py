#!/usr/bin/env python3
"""GPU check for sysprof's NVML source: one prepared script for a lent GPU machine (under 5 minutes), that also
runs on the fake NVML library (tests/fake_nvml) so that it is known to work before a GPU is at hand.

    python benchmarks/gpu_check.py [--markdown docs/gpu_check_h200.md] [--json PATH] [--seconds 3]
                                   [--calls 500] [--train-seconds 3] [--rounds 3]

1 metrics    every row of the metric table (``_native.nvml_metrics()``, so rows added later are checked too) and
             the XID waiter, per device: supported or not (the pynvml call's answer), cost per call (pynvml,
             median and p99; the floor of a trivial pynvml call shown apart), the refresh period of the
             channels it writes (read every 1 ms for --seconds by the native sampler, under a matmul load
             where torch has CUDA: sysprof/sampling/gpu_refresh.py); and what nvmlDeviceGetSamples buffers per
             type (power, utilisation, clocks): how many samples, how far apart by the driver's timestamps
2 sampler    the native sampling thread's cost per tick at a 1 ms gpu interval (the copy of the reader's latest
             reading), and the energy counter's increase against the integral of power_watts over the same rows
3 training   the step time of a real torch training loop (an MLP, bf16, AdamW) with no sampling, with the native
             sampler at 100 Hz and 1 kHz (gpu_interval = interval), and with a Python thread polling the same
             metrics through pynvml at 100 Hz and 1 kHz; the overhead is each one's median step time over the
             unsampled median, per round (configurations interleaved, their order rotated), then the median
             over rounds (goal: <= 0.5 % at 100 Hz). Skipped, with the reason, without torch and CUDA.

The markdown report (the figures and the machine) goes to --markdown and to stdout. SYSPROF_NVML_LIBRARY selects
another NVML library (the fake: ``cc -shared -fPIC -o /tmp/libnvidia-ml.so.1 tests/fake_nvml/fake_nvml.c``).
Without NVML it prints "no GPU: <reason>" and exits 0.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import threading
import time

import numpy as np

import sysprof  # the installed package (pip install .), with its extension
from sysprof.sampling.gpu_refresh import change_period, describe_period
from sysprof.sampling.portable import nvml_library as nvlib

GOAL_OVERHEAD_100HZ = 0.005
HOST_OFF = dict(cpu=False, memory=False, disk=False, net=False)


# -- NVML through pynvml, for the per-call figures and the polling comparison ------------------------------------
def open_pynvml():
    """(pynvml, [(index, handle)]) on the library sysprof would load; raises RuntimeError("no GPU: ...")."""
    try:
        pynvml = nvlib.import_pynvml()
        nvlib.load_into(pynvml)
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - no library, no driver, no pynvml
        raise RuntimeError(f"no GPU: {type(exc).__name__}: {exc}") from None
    handles = [(i, pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(pynvml.nvmlDeviceGetCount())]
    if not handles:
        raise RuntimeError("no GPU: NVML found no device")
    return pynvml, handles


def metric_calls(pynvml, h):
    """metric -> a zero-argument pynvml call of it (or the reason there is none), for every table row."""
    from sysprof._native import nvml_metrics
    from sysprof.sampling.portable.nvml_query import _getters

    getters = _getters(pynvml)
    out = {}
    for m in nvml_metrics():
        key = m["metric"]
        if m["field_id"] is not None:
            fid, scope = m["field_id"], m["scope"]

            def field(fid=fid, scope=scope):
                (v,) = pynvml.nvmlDeviceGetFieldValues(h, [(fid, scope)])
                if v.nvmlReturn != 0:
                    raise pynvml.NVMLError(v.nvmlReturn)
                return v
            out[key] = field
        elif key in getters and hasattr(pynvml, getters[key][0]):
            fn, args, _ = getters[key]
            out[key] = (lambda f=getattr(pynvml, fn), a=args: f(h, *a))
        else:
            out[key] = "no pynvml twin of this row"
    return out


def time_call(fn, n):
    ts = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        fn()
        ts.append(time.perf_counter_ns() - t0)
    ts.sort()
    return {"median_us": ts[len(ts) // 2] / 1e3, "p99_us": ts[min(len(ts) - 1, int(len(ts) * 0.99))] / 1e3, "n": n}


def probe_metrics(pynvml, handles, n):
    """Per device and metric: supported (the call's answer) and its cost; the pynvml floor."""
    floor = time_call(pynvml.nvmlDeviceGetCount, n)["median_us"]
    res = {"pynvml_floor_us": floor, "devices": {}}
    for idx, h in handles:
        rows = {}
        for key, fn in metric_calls(pynvml, h).items():
            if isinstance(fn, str):
                rows[key] = {"supported": None, "answer": fn}
                continue
            try:
                fn()
            except pynvml.NVMLError as exc:
                rows[key] = {"supported": False, "answer": nvlib.code_name(pynvml, exc.value)}
                continue
            except Exception as exc:  # noqa: BLE001 - an older pynvml without the function
                rows[key] = {"supported": False, "answer": f"{type(exc).__name__}: {exc}"}
                continue
            rows[key] = {"supported": True, "answer": "NVML_SUCCESS", **time_call(fn, n)}
        res["devices"][idx] = rows
    return res


SAMPLE_TYPES = {0: "power (NVML_TOTAL_POWER_SAMPLES)", 1: "gpu utilization (NVML_GPU_UTILIZATION_SAMPLES)",
                2: "memory utilization (NVML_MEMORY_UTILIZATION_SAMPLES)", 5: "SM clock (NVML_PROCESSOR_CLK_SAMPLES)",
                6: "memory clock (NVML_MEMORY_CLK_SAMPLES)"}


def driver_samples(pynvml, handles):
    """Per device and type: what nvmlDeviceGetSamples buffers (count, spacing of the driver's timestamps)."""
    res = {}
    for idx, h in handles:
        rows = {}
        for typ, name in SAMPLE_TYPES.items():
            try:
                _, samples = pynvml.nvmlDeviceGetSamples(h, typ, 0)
            except Exception as exc:  # noqa: BLE001 - NVMLError, or an older pynvml/driver without it
                code = getattr(exc, "value", None)
                rows[name] = {"answer": nvlib.code_name(pynvml, code) if isinstance(code, int) else type(exc).__name__}
                continue
            ts = np.array(sorted(x.timeStamp for x in samples), dtype=np.int64)
            gap = np.diff(ts) / 1e3 if len(ts) > 1 else np.array([])
            rows[name] = {"answer": "NVML_SUCCESS", "samples": len(ts), "median_gap_ms": float(np.median(gap)) if
                          len(gap) else None, "span_s": float(ts[-1] - ts[0]) / 1e6 if len(ts) > 1 else 0.0}
        res[idx] = rows
    return res


# -- load and training -------------------------------------------------------------------------------------------
def torch_cuda():
    """(torch, None) or (None, why not)."""
    try:
        import torch
    except ImportError:
        return None, "torch not installed"
    if not torch.cuda.is_available():
        return None, "torch has no CUDA device"
    return torch, None


def matmul_load(torch, stop: threading.Event):
    def run():
        a = torch.randn(8192, 8192, device="cuda:0", dtype=torch.bfloat16)
        while not stop.is_set():
            for _ in range(10):
                a @ a
            torch.cuda.synchronize()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def make_step(torch):
    """One training step of an MLP (bf16, AdamW) on cuda:0, synchronised, so that its time is the step's."""
    torch.manual_seed(0)
    dim, batch = 4096, 4096
    model = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim),
                                torch.nn.GELU(), torch.nn.Linear(dim, dim)).to("cuda:0", torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(batch, dim, device="cuda:0", dtype=torch.bfloat16)
    y = torch.randn(batch, dim, device="cuda:0", dtype=torch.bfloat16)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
    return step


class PynvmlPoller:
    """A Python thread calling every supported metric of every device through pynvml at a rate."""

    def __init__(self, calls, hz):
        self.calls, self.period, self.stop_ev = calls, 1.0 / hz, threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        nxt = time.monotonic()
        while not self.stop_ev.is_set():
            for fn in self.calls:
                fn()
            nxt += self.period
            self.stop_ev.wait(max(0.0, nxt - time.monotonic()))

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop_ev.set()
        self.thread.join()


class NativeRun:
    def __init__(self, hz):
        self.s = sysprof.Sampler(interval=1.0 / hz, gpu_interval=1.0 / hz, gpu=True, backend="native", **HOST_OFF)

    def __enter__(self):
        self.s.start()
        return self

    def __exit__(self, *exc):
        self.s.stop()
        self.s.drain()


class Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


def training(torch, supported_calls, seconds, rounds):
    step = make_step(torch)
    t_end = time.monotonic() + 2.0
    while time.monotonic() < t_end:  # warm-up: kernels chosen, clocks up
        step()
    configs = {"none": Nothing, "native 100 Hz": lambda: NativeRun(100), "native 1 kHz": lambda: NativeRun(1000),
               "pynvml 100 Hz": lambda: PynvmlPoller(supported_calls, 100),
               "pynvml 1 kHz": lambda: PynvmlPoller(supported_calls, 1000)}
    names = list(configs)
    times = {n: [] for n in names}  # per round: the median step time
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            with configs[name]():
                ts, t_end = [], time.monotonic() + seconds
                while time.monotonic() < t_end:
                    t0 = time.perf_counter()
                    step()
                    ts.append(time.perf_counter() - t0)
            times[name].append(statistics.median(ts))
    out = {}
    for name in names:
        over = [t / b - 1 for t, b in zip(times[name], times["none"])]
        out[name] = {"median_step_ms": statistics.median(times[name]) * 1e3,
                     "overhead": statistics.median(over) if name != "none" else 0.0,
                     "overhead_range": [min(over), max(over)] if name != "none" else [0.0, 0.0]}
    return out


# -- the native sampler at 1 ms ----------------------------------------------------------------------------------
def sampler_run(seconds):
    s = sysprof.Sampler(interval=0.001, gpu_interval=0.001, gpu=True, backend="native", capacity=1 << 20, **HOST_OFF)
    s.start()
    time.sleep(seconds)
    s.stop()
    b = s.drain()
    return s, b


def energy_check(b, devices):
    t = b.timestamps_ns / 1e9
    res = {}
    for d in devices:
        e, p = b.column(f"gpu/{d}/energy_joules"), b.column(f"gpu/{d}/power_watts")
        ok = np.isfinite(e) & np.isfinite(p)
        if ok.sum() < 2:
            res[d] = None
            continue
        pp, tt = p[ok], t[ok]
        res[d] = {"energy_delta_j": float(e[ok][-1] - e[ok][0]),
                  "power_integral_j": float(np.sum((pp[1:] + pp[:-1]) / 2 * np.diff(tt)))}
    return res


# -- the report --------------------------------------------------------------------------------------------------
def fmt_us(row):
    return f"{row['median_us']:.1f} / {row['p99_us']:.1f}" if "median_us" in row else "-"


def markdown(out) -> str:
    from sysprof._native import nvml_metrics

    table = {m["metric"]: m for m in nvml_metrics()}
    L = [f"# sysprof GPU check ({out['when']})", "",
         f"- machine: {out['host']}; NVML library: `{out['library']}`; driver {out.get('driver', '?')}",
         f"- devices: " + "; ".join(f"gpu/{d['index']}: {d.get('name')} ({d.get('pci_bus_id')})" for d in out["devices"]),
         f"- sampler notes: {out['errors'].get('gpu', 'none')}", f"- refresh measured {out['refresh_load']}", ""]
    L += ["## 1 Metrics", "", f"Cost: pynvml call, median / p99 us, n = {out['calls']} (a trivial pynvml call, "
          f"the floor: {out['metrics']['pynvml_floor_us']:.1f} us). Refresh: the median time between changes of "
          f"each channel read every 1 ms for {out['seconds']:g} s.", ""]
    for d, rows in out["metrics"]["devices"].items():
        L += [f"### gpu/{d}", "", "| metric | call | supported | cost (us) | refresh of its channels |", "|---|---|---|---|---|"]
        for key, row in rows.items():
            m = table[key]
            ref = ", ".join(f"{c} {describe_period(out['refresh'][f'gpu/{d}/{c}'])}" for c in m["channels"]
                            if f"gpu/{d}/{c}" in out["refresh"])
            sup = {True: "yes", False: f"no ({row['answer']})", None: f"? ({row['answer']})"}[row["supported"]]
            L.append(f"| {key} | `{m['call']}` | {sup} | {fmt_us(row)} | {ref or '-'} |")
        L.append(f"| xid events | `nvmlDeviceRegisterEvents` | {out['xid'][d]} | - | events (a waiter thread) |")
        L.append("")
    L += ["## 1b Driver samples (nvmlDeviceGetSamples)", "", "What the driver buffers, read once after the 1 ms run "
          "(not yet drained by the sampler).", "", "| device | type | answer | samples | median gap (ms) | span (s) |",
          "|---|---|---|---|---|---|"]
    for d, rows in out["driver_samples"].items():
        for name, r in rows.items():
            gap = f"{r['median_gap_ms']:.1f}" if r.get("median_gap_ms") is not None else "-"
            L.append(f"| gpu/{d} | {name} | {r['answer']} | {r.get('samples', '-')} | {gap} | {r.get('span_s', '-')} |")
    L.append("")
    st = out["sampler"]
    L += ["## 2 Sampler at 1 ms", "", f"- sampling thread per tick: mean {st['sample_ns_mean'] / 1e3:.1f} us, p99 "
          f"{st['sample_ns_p99'] / 1e3:.1f} us ({len(out['devices'])} device(s); NVML runs on the reader thread)",
          f"- rows {st['rows']}, missed deadlines {st['missed_deadlines']}, gpu reads {st['gpu_reads']}"]
    for d, e in out["energy"].items():
        L.append(f"- gpu/{d}: energy counter +{e['energy_delta_j']:.3f} J, integral of power_watts "
                 f"{e['power_integral_j']:.3f} J" if e else f"- gpu/{d}: energy or power unavailable")
    L += ["", "## 3 Training-step overhead", ""]
    tr = out["training"]
    if isinstance(tr, str):
        L.append(f"Skipped: {tr}.")
    else:
        L += [f"An MLP training step (bf16, AdamW) on cuda:0, {out['train_seconds']:g} s per configuration and round, "
              f"{out['rounds']} rounds interleaved; the overhead is the median over rounds (min..max). Goal: <= "
              f"{GOAL_OVERHEAD_100HZ:.1%} at 100 Hz.", "", "| sampling | median step (ms) | overhead | range |",
              "|---|---|---|---|"]
        for name, r in tr.items():
            L.append(f"| {name} | {r['median_step_ms']:.3f} | {r['overhead']:+.2%} | "
                     f"{r['overhead_range'][0]:+.2%} .. {r['overhead_range'][1]:+.2%} |")
        met = tr["native 100 Hz"]["overhead"] <= GOAL_OVERHEAD_100HZ
        L += ["", f"Native at 100 Hz: {'MET' if met else 'MISSED'} (goal <= {GOAL_OVERHEAD_100HZ:.1%})."]
    return "\n".join(L) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0, help="the 1 ms run (refresh periods, sampler cost)")
    ap.add_argument("--calls", type=int, default=500, help="calls per metric for its cost")
    ap.add_argument("--train-seconds", type=float, default=3.0, help="per configuration and round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--markdown", help="write the report here (e.g. docs/gpu_check_h200.md)")
    ap.add_argument("--json", help="write all figures here")
    args = ap.parse_args(argv)
    try:
        pynvml, handles = open_pynvml()
    except RuntimeError as exc:
        print(str(exc))
        return 0
    ok, why = sysprof.sampling.sampler.native_available()
    if not ok:
        print(f"native backend unavailable: {why}")
        return 1
    probe = sysprof.Sampler(gpu=True, backend="native", **HOST_OFF)
    out = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "host": f"{platform.node()} "
           f"({platform.machine()}, {os.cpu_count()} CPUs)", "library": nvlib.library_path(),
           "devices": probe.devices, "errors": dict(probe.errors), "calls": args.calls, "seconds": args.seconds,
           "train_seconds": args.train_seconds, "rounds": args.rounds}
    try:
        v = pynvml.nvmlSystemGetDriverVersion()
        out["driver"] = v.decode() if isinstance(v, bytes) else str(v)
    except Exception:  # noqa: BLE001 - the fake has none
        pass
    xid_notes = [n for n in probe.errors.get("gpu", "").split("; ") if "xid_total" in n]
    out["xid"] = {d["index"]: next((f"no ({n.split('(', 1)[-1].rstrip(')')})" for n in xid_notes
                                    if n.startswith(f"gpu/{d['index']}:")), "yes") for d in probe.devices}
    del probe
    print("1 metrics ...", file=sys.stderr)
    out["metrics"] = probe_metrics(pynvml, handles, args.calls)
    torch, no_torch = torch_cuda()
    stop = threading.Event()
    if torch is not None:
        matmul_load(torch, stop)
        time.sleep(1.0)
    out["refresh_load"] = "under a bf16 matmul load on cuda:0" if torch is not None else f"idle ({no_torch})"
    print("2 sampler at 1 ms ...", file=sys.stderr)
    s, b = sampler_run(args.seconds)
    stop.set()
    out["refresh"] = {c: change_period(b.timestamps_ns, b.column(c)) for c in s.channels if "/xid_" not in c}
    st = s.stats
    out["sampler"] = {"sample_ns_mean": st["sample_ns_mean"], "sample_ns_p99": st["sample_ns_p99"], "rows": len(b),
                      "missed_deadlines": st["missed_deadlines"], "gpu_reads": st["reads"].get("gpu")}
    out["energy"] = energy_check(b, [d["index"] for d in out["devices"]])
    out["driver_samples"] = driver_samples(pynvml, handles)
    del s, b
    if torch is None:
        out["training"] = f"{no_torch}; the training-step overhead needs torch with CUDA"
    else:
        print("3 training ...", file=sys.stderr)
        calls = [fn for idx, h in handles for key, fn in metric_calls(pynvml, h).items()
                 if out["metrics"]["devices"][idx][key]["supported"]]
        out["training"] = training(torch, calls, args.train_seconds, args.rounds)
    pynvml.nvmlShutdown()
    text = markdown(out)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
