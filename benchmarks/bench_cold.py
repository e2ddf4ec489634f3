"""Benchmark section "cold": the cache lines one tick of the sampling thread touches, counted, not timed.

A tick after a 1 ms sleep finds its data and code evicted; what it pays is mostly one miss per cache line it
touches, and that is what the paced ratio (bench_paced) measures, through noise. benchmarks/tick_cold.cpp runs
ticks of the default sources (with a default Sampler's device rules) on a copy of this machine's /proc files whose
counters advance at fixed rates per tick (the cpu line every 5th, MemFree and busy interfaces every tick, busy
disks every 10th: the paths a 1 kHz tick takes, the same in every run), each after running 64 KiB of code and
writing a 4 MiB buffer, under valgrind's cachegrind (I1/D1 32 KiB, LL 1 MiB): the tick's own functions'
last-level data misses per tick are the data lines it brings in, its I1 misses the distinct code lines it runs,
the same counts on a quiet or a loaded machine. Built from csrc/ with the extension's flags (-O3); needs
g++ and valgrind, else the section says why.
"""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import tempfile
from typing import Any, Dict, List, Optional

from bench_util import REPO, HERE, table

TOP = 16  # functions in the breakdown, by data + code lines (those under half a line a tick left out)
LEFT_OUT = re.compile(r"Fixture|slurp|basic_(i|o)?stringstream|:(main|evict|kernel_copy_model|pread|pwritev\w*|__libc_pwritev\w*|_dl_\w*|do_lookup_x|__libc_start\w*)(\(.*\))?$|dl-|malloc|memset")


def _build(workdir: str, opt: str = "-O3") -> Optional[str]:
    gxx = shutil.which("g++")
    if gxx is None:
        return "no g++ on PATH"
    srcs = [p for p in glob.glob(os.path.join(REPO, "csrc", "**", "*.cpp"), recursive=True)
            if "/tests/" not in p and not p.endswith("bindings.cpp")]
    cmd = [gxx, "-std=c++17", *opt.split(), "-DNDEBUG", "-I", os.path.join(REPO, "csrc"),
           os.path.join(HERE, "tick_cold.cpp"), *srcs, "-o", os.path.join(workdir, "tick_cold"), "-lpthread", "-ldl"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    return f"g++ failed: {r.stderr.strip()[-400:]}" if r.returncode else None


def _cachegrind(exe: str, ticks: int, i1: str, out: str, events: str) -> List[tuple]:
    subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=yes", f"--I1={i1}", "--D1=32768,8,64",
                    "--LL=1048576,16,64", f"--cachegrind-out-file={out}", exe, str(ticks), "4096"],
                   capture_output=True, text=True, check=True, timeout=1200)
    ann = subprocess.run(["cg_annotate", "--auto=no", "--threshold=0", f"--show={events}", out], capture_output=True,
                         text=True, check=True).stdout
    n = len(events.split(","))
    rows = []
    for line in ann.splitlines():
        t = re.sub(r"\([^)]*%\)", "", line).split(None, n)
        if len(t) <= n or not all(re.fullmatch(r"[\d,]+|\.", x) for x in t[:n]):
            continue
        fn = t[n].strip().replace("(anonymous namespace)::", "")
        if "PROGRAM TOTALS" in fn or LEFT_OUT.search(fn):
            continue
        rows.append(([0 if x == "." else int(x.replace(",", "")) for x in t[:n]], fn))
    return rows


def _short(fn: str) -> str:
    """A function's name without its file, namespaces, return type and parameters; a template keeps its first two
    arguments (``scan_counter_devices<7, DiskstatsLine, …>``: one row per instance)."""
    fn = fn.split(":", 1)[1] if ":" in fn else fn
    fn = re.sub(r"\(anonymous namespace\)::|sysprof::|std::__cxx11::", "", fn)
    depth, cut = 0, len(fn)
    for i, ch in enumerate(fn):  # the parameter list: the first '(' outside any <...>
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "(" and depth == 0 and i:
            cut = i
            break
    name = fn[:cut]
    depth, start = 0, 0
    for i, ch in enumerate(name):  # the return type: up to the last blank outside any <...>
        depth += ch == "<"
        depth -= ch == ">"
        if ch == " " and depth == 0:
            start = i + 1
    name = name[start:]
    if "<" in name:
        head, args = name.split("<", 1)
        parts, depth, cur = [], 0, ""
        for ch in args[:-1]:
            if ch == "," and depth == 0:
                parts.append(cur.strip())
                cur = ""
                continue
            depth += ch in "<({"
            depth -= ch in ">)}"
            cur += ch
        parts.append(cur.strip())
        short = [re.sub(r"<.*>", "", p).split("::")[-1] for p in parts[:2]]
        name = f"{head}<{', '.join(short)}{', …' if len(parts) > 2 else ''}>"
    return name[:70]


def _per_tick(exe: str, ticks: int, i1: str, out: str, events: str) -> List[tuple]:
    """Per function, the counts of ``ticks`` more ticks: a run of 2 x ``ticks`` less a run of ``ticks``, so
    start-up (the loader's symbol lookups, discovery, the first reads) cancels out exactly."""
    runs = [{fn: v for v, fn in _cachegrind(exe, n, i1, f"{out}.{n}", events)} for n in (ticks, 2 * ticks)]
    zero = [0] * len(events.split(","))
    return [([b - a for a, b in zip(runs[0].get(fn, zero), v)], fn) for fn, v in runs[1].items()]


def bench_cold(cfg, sysprof=None, opt: str = "-O3", small_i1: bool = True) -> Dict[str, Any]:
    ticks = int(cfg) if cfg else 300
    if shutil.which("valgrind") is None or shutil.which("cg_annotate") is None:
        return {"error": "valgrind (cachegrind) not on PATH"}
    with tempfile.TemporaryDirectory(prefix="sysprof-cold-") as d:
        why = _build(d, opt)
        if why:
            return {"error": why}
        exe = os.path.join(d, "tick_cold")
        data = _per_tick(exe, ticks, "32768,8,64", os.path.join(d, "cg.d"), "Ir,DLmr,DLmw,I1mr")
        small = _per_tick(exe, ticks, "2048,2,64", os.path.join(d, "cg.i"), "I1mr") if small_i1 else []
    per = lambda x: x / ticks  # noqa: E731
    code_of: Dict[str, float] = {}  # per short name (clones of one function counted together)
    for v, fn in data:
        code_of[_short(fn)] = code_of.get(_short(fn), 0) + v[3]
    merged: Dict[str, List[float]] = {}
    for v, fn in data:
        m = merged.setdefault(_short(fn), [0, 0, 0])
        for k in range(3):
            m[k] += v[k]
    funcs = sorted(((per(v[1] + v[2] + code_of.get(fn, 0)), per(v[1] + v[2]), per(v[1]), per(v[2]),
                     per(code_of.get(fn, 0)), per(v[0]), fn) for fn, v in merged.items()), reverse=True)
    keys = ("all_lines", "lines", "read", "write", "code", "instructions", "function")
    return {"ticks": ticks, "instructions": per(sum(v[0] for v, _ in data)),
            "data_lines": per(sum(v[1] + v[2] for v, _ in data)), "data_read_lines": per(sum(v[1] for v, _ in data)),
            "data_write_lines": per(sum(v[2] for v, _ in data)), "code_lines": per(sum(v[3] for v, _ in data)),
            "code_misses_2k": per(sum(v[0] for v, _ in small)) if small_i1 else None,
            "functions": [dict(zip(keys, f)) for f in funcs[:TOP] if f[0] >= 0.5]}


def print_cold(res) -> str:
    if res.get("error"):
        return f"## Cold tick (cachegrind)\n\nskipped: {res['error']}\n"
    out = ["## Cold tick: cache lines one tick touches (cachegrind, default sources)", "",
           f"{res['ticks']} ticks after a 4 MiB eviction each (a run of 2 x that less a run of that: start-up cancels); per tick: {res['instructions']:.0f} instructions, "
           f"**{res['data_lines']:.0f} data lines** ({res['data_read_lines']:.0f} read, {res['data_write_lines']:.0f} "
           f"written), **{res['code_lines']:.0f} code lines** (distinct: misses of a 32 KiB I1 emptied before each "
           "tick" + (f"; {res['code_misses_2k']:.0f} misses of a 2 KiB I1, the measure of earlier runs, which counts "
                     "a loop larger than it on every pass" if res.get("code_misses_2k") is not None else "")
           + "). Counts, not times: the same on a loaded machine; at ~15 ns a line from L3 and ~80 ns from DRAM they "
           "bound what the cold cache adds.", ""]
    out.append(table(["function", "data lines", "read", "written", "code lines", "instructions"],
                     [[f["function"], f"{f['lines']:.1f}", f"{f['read']:.1f}", f"{f['write']:.1f}",
                       f"{f['code']:.1f}", f"{f['instructions']:.0f}"] for f in res["functions"]]))
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    import sys

    print(print_cold(bench_cold(300, opt=sys.argv[1] if len(sys.argv) > 1 else "-O3")))
