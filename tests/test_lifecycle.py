"""Interpreter exit and fork(): sysprof must never abort, hang or corrupt the process it runs in.

Every case runs in a fresh interpreter (subprocess) and is repeated, because the failures it guards
against are races with interpreter finalization. No test asserts a duration: a case that hangs is
caught by the subprocess timeout, which is generous enough for a machine with every core busy.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap

import pytest

import sysprof

TIMEOUT_S = 120  # only a hang reaches this, even on a loaded machine
REPEAT = 5


def run_py(code: str, *, repeat: int = 1) -> list:
    """Runs ``code`` as a script file (so that multiprocessing's spawn can import it) in new interpreters,
    from a directory without the source checkout; returns the CompletedProcess of each run."""
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "case.py")
        with open(script, "w") as f:
            f.write(textwrap.dedent(code))
        for _ in range(repeat):
            runs.append(subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=TIMEOUT_S,
                                       cwd=tmp))
    return runs


def assert_clean(runs: list) -> None:
    for r in runs:
        assert r.returncode == 0, f"exit status {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"
        assert "terminate called" not in r.stderr and "Fatal Python error" not in r.stderr, r.stderr


# ---------------------------------------------------------------- interpreter exit

# A daemon thread inside each native call when the interpreter finalizes. Before the fix each of
# these ended in SIGABRT ("terminate called without an active exception"), 20 of 20 runs for drain().
EXIT_WHILE_IN_CALL = {
    "drain": "s.drain()",
    "sample": "s.sample()",
    "stop_start": "s.stop(); s.start()",  # two threads race: start() may find it running (RuntimeError)
    "constructor": "sysprof.Sampler(interval=0.001, backend=BACKEND)",
    "stats_errors": "s.stats; s.errors; s.running",
}


@pytest.mark.parametrize("backend", ["native", "psutil"])
@pytest.mark.parametrize("call", sorted(EXIT_WHILE_IN_CALL))
def test_exit_while_a_daemon_thread_is_in_a_call(call, backend):
    script = "\n".join([
        "import threading, time, sysprof, warnings",
        "warnings.simplefilter('ignore')",
        f"BACKEND = {backend!r}",
        "s = sysprof.Sampler(interval=0.001, backend=BACKEND); s.start()",
        "def loop():",
        "    while True:",
        "        try:",
        f"            {EXIT_WHILE_IN_CALL[call]}",
        "        except RuntimeError:",
        "            pass",
        "for _ in range(2):",
        "    threading.Thread(target=loop, daemon=True).start()",
        "time.sleep(0.05)",
    ])
    assert_clean(run_py(script, repeat=REPEAT))


def test_exit_with_samplers_left_running():
    # Running samplers nobody stopped: some freed at module teardown, one kept alive by a cycle.
    runs = run_py("""
        import time, sysprof
        a = sysprof.Sampler(interval=0.001, process=True, process_tree=True, load=True).start()
        b = sysprof.Sampler(interval=0.0005).start()
        cycle = [sysprof.Sampler(interval=0.001).start()]
        cycle.append(cycle)
        time.sleep(0.03)
        """, repeat=REPEAT)
    assert_clean(runs)


def test_exit_with_profiler_and_system_profiler_running(tmp_path):
    # sysprof.Profiler with its SystemProfiler (drain thread) left running, with a daemon thread marking.
    runs = run_py(f"""
        import threading, time, sysprof
        prof = sysprof.Profiler(schedule=lambda state: sysprof.ProfilerAction.ACTIVE,
                                trace_handlers=[sysprof.JSONTraceHandler(folder={str(tmp_path)!r}, overwrite=True)],
                                sys_prof_cpu=True, sys_prof_memory=True, sys_prof_stats_thread_interval_seconds=0.001)
        prof.start()
        m, other = prof.marker("work"), prof.marker("daemon")
        def loop():
            while True:
                with other:
                    pass
        threading.Thread(target=loop, daemon=True).start()
        for _ in range(5):
            with m:
                time.sleep(0.005)
            prof.step()
        """, repeat=3)
    assert_clean(runs)


def test_exit_with_a_profile_context_left_open_saves_and_merges(tmp_path):
    # A profile() context entered but never left, and a Profiler started but never stopped: at exit the runs
    # are stopped while the interpreter still works (atexit), so every trace is written and merged whole.
    # Before, the generator's cleanup ran during module teardown: a traceback and a 0-byte merged trace.
    runs = run_py(f"""
        import contextlib, sysprof
        stack = contextlib.ExitStack()
        prof = stack.enter_context(sysprof.profile({str(tmp_path / "ctx")!r}, overwrite=True))
        with prof.marker("open_context"):
            pass
        prof.step()
        bare = sysprof.Profiler(schedule=lambda state: sysprof.ProfilerAction.ACTIVE, sys_prof_cpu=False,
                                trace_handlers=[sysprof.JSONTraceHandler(folder={str(tmp_path / "bare")!r},
                                                                         overwrite=True)])
        bare.start()
        with bare.marker("never_stopped"):
            pass
        """)
    assert_clean(runs)
    assert "Error" not in runs[0].stderr and "Traceback" not in runs[0].stderr, runs[0].stderr
    for folder, name in (("ctx", "open_context"), ("bare", "never_stopped")):
        events = json.loads((tmp_path / folder / "merged_trace.json").read_text())
        assert [e["ph"] for e in events if e.get("name") == name] == ["B", "E"], (folder, events)


def test_exit_from_a_worker_thread_calling_sys_exit():
    # sys.exit in the main thread while non-daemon work already finished and a daemon drains.
    runs = run_py("""
        import sys, threading, time, sysprof
        s = sysprof.Sampler(interval=0.001).start()
        threading.Thread(target=lambda: [s.drain() for _ in iter(int, 1)], daemon=True).start()
        time.sleep(0.02)
        sys.exit(0)
        """, repeat=REPEAT)
    assert_clean(runs)


# ---------------------------------------------------------------- fork

FORK_PRELUDE = """
import json, os, sys, time, sysprof
s = sysprof.Sampler(interval=0.001, process=True); s.start(); time.sleep(0.02)
def child_report(**kw):
    sys.stdout.write(json.dumps(kw) + "\\n"); sys.stdout.flush()
"""


FORK_PARENT = """
    _, status = os.waitpid(pid, 0)
    deadline = time.monotonic() + 60
    while s.stats["taken"] <= taken_before + 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    parent = dict(running=s.running, grew=s.stats["taken"] > taken_before + 5, errors=s.errors)
    s.stop()
    st = s.stats
    parent["identity"] = st["taken"] == st["drained"] + st["dropped"] + st["buffered"]
    child_report(parent=parent, status=status)
"""


def fork_case(child_body: str, *, repeat: int = 3) -> list:
    """Forks while ``s`` runs; the child runs ``child_body``; the parent checks that its sampler kept
    running across the fork and reports the child's status. Returns the child reports per run."""
    child = textwrap.indent(textwrap.dedent(child_body).strip() + "\n", "    ")
    script = FORK_PRELUDE + "taken_before = s.stats['taken']\npid = os.fork()\nif pid == 0:\n" + child + "else:" + FORK_PARENT
    runs = run_py(script, repeat=repeat)
    assert_clean(runs)
    out = []
    for r in runs:
        reports = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
        parent = [x for x in reports if "parent" in x][-1]
        assert parent["status"] == 0, r.stderr
        assert parent["parent"]["running"] and parent["parent"]["grew"] and parent["parent"]["identity"], parent
        assert not any("blocked" in v for v in parent["parent"]["errors"].values()), parent
        out.append([x for x in reports if "parent" not in x])
    return out


def test_fork_child_sees_inherited_sampler_not_running_and_exits_normally():
    for reports in fork_case("""
        before = dict(running=s.running, inherited=s.inherited, buffered=len(s.drain()), errors=s.errors)
        s.stop(); s.stop()
        del s
        child_report(**before)
        sys.exit(0)
        """):
        (r,) = reports
        assert r["running"] is False and r["inherited"] is True and r["buffered"] == 0
        assert list(r["errors"]) == ["sampler"] and "fork" in r["errors"]["sampler"]


def test_fork_child_exit_via_os_exit_and_via_falling_off_the_end():
    fork_case("""
        os._exit(0)
        """)
    fork_case("""
        s.drain()  # and then the end of the script
        """)


def test_fork_child_runs_its_own_sampler_then_exits():
    # Before the fix: SIGABRT after 4 s, 30 of 30 runs.
    for reports in fork_case("""
        with sysprof.Sampler(interval=0.001) as own:
            time.sleep(0.03)
        own_rows = len(own.drain())
        own.start(); own.stop()
        st = own.stats
        child_report(rows=own_rows, running=own.running, errors=own.errors,
                     identity=st["taken"] == st["drained"] + st["dropped"] + st["buffered"])
        sys.exit(0)
        """):
        (r,) = reports
        assert r["rows"] >= 1  # the start row at least (the stop row is skipped when one was just taken)
        assert r["running"] is False and r["identity"] and not r["errors"]


def test_fork_child_stops_the_inherited_sampler_then_makes_its_own():
    # Before the fix: stop() logged a false "blocked" error and detached a thread id that could be one
    # of the child's own threads; the child's own sampler then raised RuntimeError('Invalid argument').
    for reports in fork_case("""
        s.stop()
        own = sysprof.Sampler(interval=0.001, cpu=True, memory=False, disk=False, net=False).start()
        time.sleep(0.02)
        own.stop()
        try:
            s.start()
            start_error = None
        except RuntimeError as e:
            start_error = str(e)
        try:
            s.sample()
            sample_error = None
        except RuntimeError as e:
            sample_error = str(e)
        child_report(own_running=own.running, own_rows=len(own.drain()), start_error=start_error,
                     sample_error=sample_error, own_errors=own.errors)
        sys.exit(0)
        """):
        (r,) = reports
        assert r["own_running"] is False and r["own_rows"] >= 1 and not r["own_errors"]
        assert r["start_error"] and "fork" in r["start_error"]
        assert r["sample_error"] and "fork" in r["sample_error"]


def test_fork_psutil_backend():
    runs = run_py("""
        import os, sys, time, warnings, sysprof
        warnings.simplefilter("ignore")
        s = sysprof.Sampler(interval=0.001, backend="psutil").start(); time.sleep(0.02)
        pid = os.fork()
        if pid == 0:
            ok = not s.running and len(s.drain()) == 0
            s.stop(); s.stats
            with sysprof.Sampler(interval=0.001, backend="psutil") as own:
                time.sleep(0.02)
            ok = ok and len(own.drain()) >= 1
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        taken = s.stats["taken"]
        while s.stats["taken"] <= taken:
            time.sleep(0.005)
        s.stop()
        sys.exit(0 if status == 0 else 1)
        """, repeat=3)
    assert_clean(runs)


def test_fork_while_system_profiler_writes_keeps_the_parent_trace_intact(tmp_path):
    # The child inherits the JSONTraceHandler's open file; its exit (which frees, flushes and closes the
    # inherited file objects) must not write into the parent's trace, and it must not drain the parent's
    # sampler or wait on locks the parent's drain thread held.
    runs = run_py(f"""
        import os, sys, time, sysprof
        folder = {str(tmp_path)!r}
        with sysprof.profile(folder, overwrite=True, sys_prof_cpu=True, sys_prof_memory=True,
                             sys_prof_stats_thread_interval_seconds=0.001) as prof:
            m = prof.marker("step")
            for i in range(6):
                with m:
                    time.sleep(0.01)
                if i == 2:
                    pid = os.fork()
                    if pid == 0:
                        with prof.marker("child_only"):
                            pass
                        sys.exit(0)
                    _, status = os.waitpid(pid, 0)
                prof.step()
        sys.exit(0 if status == 0 else 1)
        """, repeat=2)
    assert_clean(runs)
    merged = tmp_path / "merged_trace.json"
    events = json.loads(merged.read_text())
    names = {e.get("name") for e in events}
    assert "step" in names and "child_only" not in names
    assert sum(1 for e in events if e.get("name") == "step" and e.get("ph") == "B") >= 6


def test_multiprocessing_fork_and_spawn_workers_with_their_own_samplers():
    runs = run_py("""
        import multiprocessing as mp, sys, time, sysprof

        def work(i):
            with sysprof.Sampler(interval=0.001, cpu=True, memory=True, disk=False, net=False) as s:
                sum(range(20000))
            b = s.drain()
            return len(b) >= 1 and not s.running  # a row at start at least; the stop row may be skipped

        if __name__ == "__main__":
            parent = sysprof.Sampler(interval=0.001).start()
            results = {}
            for method in ("fork", "spawn"):
                with mp.get_context(method).Pool(2) as pool:
                    results[method] = pool.map(work, range(4))
            taken = parent.stats["taken"]
            while parent.stats["taken"] <= taken:
                time.sleep(0.005)
            ok = parent.running and all(all(v) for v in results.values())
            parent.stop()
            print(results)
            sys.exit(0 if ok else 1)
        """, repeat=1)
    assert_clean(runs)


DATALOADER = """
import sys, time, sysprof, torch
from torch.utils.data import DataLoader, Dataset

class Squares(Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        return torch.tensor([float(i * i)])

if __name__ == "__main__":
    with sysprof.Sampler(interval=0.001, process_tree=True) as s:
        total = 0.0
        for epoch in range(2):
            for batch in DataLoader(Squares(), batch_size=8, num_workers=2):
                total += float(batch.sum())
    rows = s.drain()
    members = rows.column("process_tree/num_processes")
    ok = total == 2 * sum(i * i for i in range(64)) and len(rows) > 0 and not s.running
    print("total", total, "rows", len(rows), "max members", max(members))
    sys.exit(0 if ok else 1)
"""


def test_torch_dataloader_workers_with_a_running_sampler():
    # Where this interpreter has no torch, the Composer integration venv (torch from this machine's disk) runs it
    # with this session's sysprof; skipped only where neither exists.
    with tempfile.TemporaryDirectory() as tmp:
        try:
            import torch  # noqa: F401
            python, env = sys.executable, None
        except ImportError:
            import recipe_venv
            import test_composer_integration
            python = str(test_composer_integration.venv() / "bin" / "python")
            env = recipe_venv.sysprof_env(tmp)
        script = os.path.join(tmp, "loader.py")
        with open(script, "w") as f:
            f.write(DATALOADER)
        r = subprocess.run([python, script], capture_output=True, text=True, timeout=600, cwd=tmp, env=env)
    assert_clean([r])


def test_inherited_flag_is_false_in_the_process_that_made_it():
    with sysprof.Sampler(interval=0.01) as s:
        assert s.inherited is False and s.running
    assert not s.running and s.inherited is False
