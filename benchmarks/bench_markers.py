"""Benchmark section 4: marker cost (benchmarks/marker_bench.py, and Composer's markers where importable)."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from typing import Any, Dict, Optional

from bench_util import HERE, REPO, dist, fmt, fd, table


# ------------------------------------------------------------------------------------------------
# section 4: marker API (benchmarks/marker_bench.py, written alongside)
# ------------------------------------------------------------------------------------------------

def _load_marker_bench():
    path = os.path.join(HERE, "marker_bench.py")
    if not os.path.exists(path):
        return None, "not available: benchmarks/marker_bench.py does not exist"
    spec = importlib.util.spec_from_file_location("sysprof_marker_bench", path)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except Exception as exc:  # noqa: BLE001 - a broken helper must not take the suite down
        return None, f"not available: marker_bench.py failed to import: {type(exc).__name__}: {exc}"
    return mod, ""


def _composer_python() -> Optional[str]:
    """An interpreter with Composer: $SYSPROF_COMPOSER_PYTHON, else ../composer-venv (shared/recipes/composer-venv.sh)."""
    for cand in (os.environ.get("SYSPROF_COMPOSER_PYTHON"),
                 os.path.join(os.path.dirname(REPO), "composer-venv", "bin", "python")):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


def _composer_elsewhere(calls: int, repeats: int, why_not_here: str):
    """Runs marker_bench.bench_composer in an interpreter that has Composer (list of results, or a reason)."""
    py = _composer_python()
    if py is None:
        return why_not_here
    code = ("import json, sys, tempfile; sys.path[:0] = [sys.argv[1], sys.argv[2]]\n"
            "import marker_bench\nout = []\n"
            "for _ in range(int(sys.argv[4])):\n"
            "    with tempfile.TemporaryDirectory() as d:\n"
            "        r = marker_bench.bench_composer(int(sys.argv[3]), d)\n"
            "    out.append(r)\n    if isinstance(r, str): break\n"
            "print('@@' + json.dumps(out))\n")
    try:
        r = subprocess.run([py, "-c", code, HERE, REPO, str(calls), str(repeats)], capture_output=True, text=True,
                           timeout=600, cwd=REPO)
        line = [x for x in r.stdout.splitlines() if x.startswith("@@")]
        if r.returncode != 0 or not line:
            return f"{why_not_here}; {py} failed: {(r.stderr or r.stdout).strip()[-300:]}"
        out = json.loads(line[-1][2:])
    except Exception as exc:  # noqa: BLE001
        return f"{why_not_here}; {py}: {type(exc).__name__}: {exc}"
    if out and isinstance(out[-1], str):
        return f"{why_not_here}; {py}: {out[-1]}"
    return out


def bench_marker(cfg, quick: bool) -> Dict[str, Any]:
    """Runs marker_bench.bench_sysprof (and bench_composer when Composer imports) ``repeats`` times."""
    calls, repeats = cfg["marker"]
    mod, why = _load_marker_bench()
    if mod is None:
        return {"available": False, "reason": why}
    if not callable(getattr(mod, "bench_sysprof", None)):
        return {"available": False, "reason": "not available: marker_bench.py has no bench_sysprof(calls, folder)"}
    out: Dict[str, Any] = {"available": True, "calls_per_repeat": calls, "repeats": repeats,
                           "method": "benchmarks/marker_bench.py: per-call µs = median over chunks of 4096 calls "
                                     "(call_us), mean over chunks (call_mean_us), and mean including the deferred "
                                     "JSON encoding and write (with_encode_us); here repeated, spread over repeats",
                           "profilers": {}}
    for label in ("sysprof", "composer"):
        fn = getattr(mod, f"bench_{label}", None)
        if not callable(fn):
            continue
        runs = []
        try:
            for _ in range(repeats):
                with tempfile.TemporaryDirectory() as d:
                    r = fn(calls, d)
                if isinstance(r, str):
                    runs = r
                    break
                runs.append(r)
        except Exception as exc:  # noqa: BLE001
            runs = f"failed: {type(exc).__name__}: {exc}"
        if label == "composer" and isinstance(runs, str) and not quick:
            runs = _composer_elsewhere(calls, repeats, runs)
        if isinstance(runs, str):
            out["profilers"][label] = {"available": False, "reason": runs}
            continue
        ops: Dict[str, Any] = {}
        for op in runs[0]:
            ops[op] = {fig: dist([r[op][fig] for r in runs], "us") for fig in runs[0][op]}
        out["profilers"][label] = {"available": True, "ops": ops}
    return out


def print_marker(res) -> str:
    if not res.get("available"):
        return f"## 4. Marker API\n\n{res['reason']}\n"
    rows = []
    for label, p in res["profilers"].items():
        if not p.get("available"):
            rows.append([label, p["reason"][:100], "-", "-", "-"])
            continue
        for op, figs in p["ops"].items():
            rows.append([label, op, fd(figs.get("call_us", {})), fmt(figs.get("call_mean_us", {}).get("median")),
                         fmt(figs.get("with_encode_us", {}).get("median"))])
    return (f"## 4. Marker API (benchmarks/marker_bench.py, {res['calls_per_repeat']:,} calls × {res['repeats']} "
            f"repeats, µs per call)\n\n"
            + table(["profiler", "operation", "call (median of repeats)", "mean", "+encode"], rows) + "\n")
