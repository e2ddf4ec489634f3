"""sysprof report --ranks on synthetic per-rank traces with exact answers (sysprof.report.ranks)."""
import json

import pytest

from cli_support import run_cli
from sysprof.report.model import ReportError
from sysprof.report.ranks import format_ranks, rank_report

US = 1_000_000


def _trace(path, rank, node, local, steps_us, counters, offset_us=0.0, step="step"):
    """A Composer-layout rank file: rank metadata, ``step`` X spans of the given durations one after the other,
    constant counters {name: {key: value}} at 0 s and at the end."""
    ev = [{"name": "global_rank", "ph": "M", "pid": rank, "tid": 7, "args": {"value": rank}},
          {"name": "clock_sync_timestamp_us", "ph": "M", "pid": rank, "tid": 7, "args": {"value": 10 * US}},
          {"name": "sysprof_rank", "ph": "M", "pid": rank, "tid": 7,
           "args": {"rank": rank, "local_rank": local, "node": node, "world_size": 3, "local_world_size": 2,
                    "clock_offset_us": offset_us, "clock_uncertainty_us": 40.0}}]
    t = 10 * US
    for d in steps_us:
        ev.append({"name": step, "ph": "X", "ts": t, "dur": d, "pid": rank, "tid": 7})
        t += d
    for ts in (10 * US, t):
        for name, args in counters.items():
            ev.append({"name": name, "ph": "C", "ts": ts, "pid": rank, "tid": 7, "args": args})
    path.write_text(json.dumps(ev))
    return path


@pytest.fixture
def three_ranks(tmp_path):
    """Ranks 0 and 1 on node a, rank 2 alone on node b; rank 2 takes 3x as long per step, its process uses more
    CPU and its node has CPU steal; rank 1 (local rank 1) has no host channels (one host sampler per node)."""
    net = {"bytes_recv_per_second": 5e6}
    _trace(tmp_path / "ep0-ba4-rank0.json", 0, "a", 0, [100_000, 100_000, 120_000, 100_000],
           {"process": {"cpu_percent": 100.0}, "cpu": {"steal_percent": 0.5}, "net/eth0": net})
    _trace(tmp_path / "ep0-ba4-rank1.json", 1, "a", 1, [100_000, 110_000, 100_000, 100_000],
           {"process": {"cpu_percent": 110.0}}, offset_us=-2500.0)
    _trace(tmp_path / "ep0-ba4-rank2.json", 2, "b", 0, [300_000] * 4,
           {"process": {"cpu_percent": 190.0}, "cpu": {"steal_percent": 12.0}, "net/eth0": net}, offset_us=120.0)
    (tmp_path / "merged_trace.json").write_text("[]")  # left out of a folder
    return tmp_path


def test_three_ranks_straggler_and_evidence(three_ranks):
    report = rank_report([str(three_ranks)])
    assert [(r["rank"], r["node"], r["steps"]) for r in report["ranks"]] == [(0, "a", 4), (1, "a", 4), (2, "b", 4)]
    p = {r["rank"]: (r["step_seconds_p50"], r["step_seconds_p95"]) for r in report["ranks"]}
    assert p[0] == pytest.approx((0.1, 0.117))  # numpy's linear percentile of [.1, .1, .1, .12]
    assert p[1] == pytest.approx((0.1, 0.1085))
    assert p[2] == pytest.approx((0.3, 0.3))
    (s,) = report["stragglers"]
    assert s["rank"] == 2 and s["slowdown"] == pytest.approx(3.0)
    assert s["evidence"] == ["process CPU higher: 190 % vs 105 % on the other ranks (median)",
                             "CPU steal higher: 12 % vs 0.5 % on the other nodes (median)"]
    assert report["_detail"]["clock"][1] == {"shift_us": -2500, "offset_us": -2500.0, "uncertainty_us": 40.0}
    assert report["_detail"]["step"] == "step"
    text = format_ranks(report)
    assert "straggler: rank 2, 3.00x the other ranks' median step" in text
    assert "-2500 us +- 40 us" in text


def test_no_straggler_and_step_pattern(tmp_path):
    for r in (0, 1):
        _trace(tmp_path / f"r{r}.json", r, "a", r, [200_000] * 3, {}, step="event/batch")
    report = rank_report([str(tmp_path / "r0.json"), str(tmp_path / "r1.json")])
    assert report["stragglers"] == [] and report["_detail"]["step"] == "event/batch"
    assert "no straggler" in format_ranks(report)
    with pytest.raises(ReportError, match="no step spans"):
        rank_report([str(tmp_path)], step=["fwd*"])


def test_errors(tmp_path):
    with pytest.raises(ReportError, match="no such file"):
        rank_report([str(tmp_path / "nope")])
    with pytest.raises(ReportError, match="no trace files"):
        rank_report([str(tmp_path)])
    (tmp_path / "x.json").write_text(json.dumps([{"name": "step", "ph": "X", "ts": 0, "dur": 1, "pid": 1, "tid": 1}]))
    with pytest.raises(ReportError, match="no rank"):
        rank_report([str(tmp_path)])


def test_cli_json_is_the_issue_layout(three_ranks):
    r = run_cli("report", "--ranks", three_ranks, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert list(out) == ["ranks", "stragglers"]
    assert [list(x) for x in out["ranks"]] == [["rank", "node", "steps", "step_seconds_p50", "step_seconds_p95"]] * 3
    assert [list(x) for x in out["stragglers"]] == [["rank", "slowdown", "evidence"]]
    assert out["stragglers"][0]["rank"] == 2
    r = run_cli("report", "--ranks", three_ranks)
    assert r.returncode == 0 and "straggler: rank 2" in r.stdout
    r = run_cli("report")
    assert r.returncode == 2 and "--ranks" in r.stderr


def test_record_trace_carries_the_rank(tmp_path):
    import os
    import platform

    from cli_support import event
    from sysprof.trace.chrome import read_trace

    env = {**os.environ, "RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2"}
    trace = tmp_path / "r3.json"
    r = run_cli("record", "-q", "-o", trace, "--duration", "0.2", "--interval", "10ms", env=env)
    assert r.returncode == 0, r.stderr
    events = read_trace(trace)
    meta = event(events, "sysprof start")["args"]
    assert (meta["rank"], meta["local_rank"], meta["world_size"], meta["local_world_size"], meta["node"]) == \
        (3, 1, 4, 2, platform.node())
    assert [e["args"]["value"] for e in events if e["name"] == "global_rank"] == [3]
