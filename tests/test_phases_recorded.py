"""Phase attribution end to end, on a real recorded workload with known phases: a program run under
`sysprof record` marks a busy-CPU phase, a write-and-fsync phase and a sleep phase with sysprof.mark();
`report --by` must find each once, with its duration from the markers' own timestamps, and attribute the
process's CPU to the busy phase, not to the sleep. No timing asserts: what is compared is the same process's
CPU in two of its own phases (a loop on the CPU against a sleep), which holds on a loaded machine too."""
from __future__ import annotations

import json
import sys

from cli_support import run_cli
from sysprof.report import TraceData
from sysprof.trace.chrome import read_trace

CHILD = r"""
import os, sys, time
import sysprof

path = sys.argv[1]
with sysprof.mark("busy"):
    t = time.process_time()
    x = 0
    while time.process_time() - t < 0.3:  # 0.3 s of this process's CPU, however long that takes
        x += 1
with sysprof.mark("write"):
    with open(path, "wb") as f:
        f.write(os.urandom(1 << 22))
        f.flush()
        os.fsync(f.fileno())
with sysprof.mark("sleep"):
    time.sleep(0.3)
"""


def test_report_by_on_a_marked_recording(tmp_path):
    trace = tmp_path / "t.json"
    proc = run_cli("record", "-q", "--interval", "5ms", "--cpu", "--disk", "--process", "-o", trace, "--",
                   sys.executable, "-c", CHILD, tmp_path / "data.bin", timeout=180)
    assert proc.returncode == 0, proc.stderr
    spans = {s.name: s for s in TraceData(read_trace(trace)).spans}
    assert {"busy", "write", "sleep"} <= set(spans)
    assert spans["busy"].end_us <= spans["write"].start_us <= spans["write"].end_us <= spans["sleep"].start_us

    out = run_cli("report", "--json", trace, "--by", "busy", "--by", "write", "--by", "sleep", timeout=120)
    assert out.returncode == 0, out.stderr
    phases = {p["name"]: p for p in json.loads(out.stdout)["phases"]}
    assert list(phases) == ["busy", "write", "sleep"]
    for name, p in phases.items():
        assert p["count"] == 1
        assert abs(p["duration_seconds"] - spans[name].duration_us / 1e6) < 1e-6, name
    cpu = {name: p["channels"]["process/cpu_seconds_total"] for name, p in phases.items()}
    assert cpu["busy"]["unit"] == "s"
    # the busy phase spends at least 0.3 s of CPU (sampled every 5 ms: most of it inside the span); the sleep
    # spends next to none
    assert cpu["busy"]["amount"] > 0.2
    assert cpu["sleep"]["amount"] < cpu["busy"]["amount"] / 4
    pct = {name: p["channels"]["process/cpu_percent"]["mean"] for name, p in phases.items()}
    assert pct["busy"] > 4 * pct["sleep"]
