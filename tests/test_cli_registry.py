"""The CLI reads the source registry: a source added there gets its record flag, its place in --all and in
``sysprof info``; ``record`` declares every channel's unit in the trace and ``report`` uses the declared one."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from sysprof.sampling import registry
from sysprof.sampling.registry import ChannelSpec, OptionSpec, SourceSpec
from sysprof.trace.chrome import ChromeTraceWriter, read_trace
from sysprof.trace.schema import UNITS_EVENT, units_event

_SCRIPT = os.path.join(os.path.dirname(sys.executable), "sysprof")
SYSPROF = [_SCRIPT] if os.path.exists(_SCRIPT) else [sys.executable, "-m", "sysprof"]
T0 = 1_700_000_000_000_000  # µs


def run_cli(*args, timeout=60):
    return subprocess.run(SYSPROF + [str(a) for a in args], capture_output=True, text=True, timeout=timeout)


FAKE = SourceSpec("fake_thing", "a source the CLI has never heard of", "/proc/fake_thing",
                  (ChannelSpec("fake_thing/level_bytes", "B", "gauge", "a level", "field 1", "non_negative"),),
                  options=(OptionSpec("fake_detail", "also the detail"),))


@pytest.fixture
def fake_source(monkeypatch):
    monkeypatch.setitem(registry.SOURCES, FAKE.name, FAKE)
    return FAKE


def test_a_registry_source_gets_its_flags(fake_source, capsys):
    from sysprof.cli import _sources_from_args, build_parser

    parser = build_parser()
    args = parser.parse_args(["record", "--fake-thing"])
    chosen = _sources_from_args(args, have_target=False)
    assert chosen["fake_thing"] is True and chosen["fake_detail"] is False and chosen["cpu"] is False
    chosen = _sources_from_args(parser.parse_args(["record", "--fake-detail"]), have_target=False)
    assert chosen["fake_thing"] is True and chosen["fake_detail"] is True  # an option implies its source
    chosen = _sources_from_args(parser.parse_args(["record", "--all"]), have_target=False)
    assert chosen["fake_thing"] and chosen["fake_detail"] and chosen["cgroup"]
    assert not chosen["process"] and not chosen["process_tree"]  # they need a command or --pid
    chosen = _sources_from_args(parser.parse_args(["record", "--all"]), have_target=True)
    assert chosen["process"] and chosen["process_tree"]
    chosen = _sources_from_args(parser.parse_args(["record"]), have_target=False)
    assert [n for n, on in chosen.items() if on] == list(registry.DEFAULT_SOURCES)  # not a default source
    chosen = _sources_from_args(parser.parse_args(["record", "--pid", "1"]), have_target=True, pid_given=True)
    assert [n for n, on in chosen.items() if on] == list(registry.DEFAULT_SOURCES) + ["process"]
    with pytest.raises(SystemExit):
        parser.parse_args(["record", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--fake-thing a source the CLI has never heard of (/proc/fake_thing)" in help_text
    assert "--fake-detail also the detail" in help_text


def test_every_registry_source_is_in_record_help():
    help_text = run_cli("record", "--help").stdout
    for spec in registry.SOURCES.values():
        assert spec.flag in help_text and spec.file in help_text
        assert all(opt.flag in help_text for opt in spec.options)


def test_info_lists_a_registry_source(fake_source, monkeypatch):
    import sysprof
    from sysprof.cli.info import gather_info

    seen = {}

    class FakeSampler:
        backend = "psutil"

        def __init__(self, interval, **kw):
            seen.update(kw)
            self.channels = ("cpu/percent", "fake_thing/level_bytes")
            self.errors = {"memory": "no /proc/meminfo"}

    monkeypatch.setattr(sysprof, "Sampler", FakeSampler)
    info = gather_info()
    assert seen["fake_thing"] is True and seen["fake_detail"] is True and seen["per_cpu"] is True
    assert list(info["sources"]) == list(registry.SOURCES)
    assert info["sources"]["fake_thing"] == {"available": True, "channels": 1}
    assert info["sources"]["cpu"] == {"available": True, "channels": 1}
    assert info["sources"]["memory"] == {"available": False, "channels": 0, "reason": "no /proc/meminfo"}
    assert info["sources"]["gpu"] == {"available": False, "channels": 0, "reason": "no channels"}
    assert "/proc/fake_thing" in info["proc_files"] and "/proc/pressure/io" in info["proc_files"]
    assert "/proc/self/stat" in info["proc_files"]


def test_record_declares_every_channel_unit(tmp_path):
    path = tmp_path / "t.json"
    proc = run_cli("record", "-q", "-o", path, "--cpu", "--memory", "--duration", "0.2")
    assert proc.returncode == 0, proc.stderr
    events = read_trace(path)
    names = [e.get("name") for e in events]
    assert names.count(UNITS_EVENT) == 1 and names.index(UNITS_EVENT) == names.index("sysprof start") + 1
    start = events[names.index("sysprof start")]
    units = events[names.index(UNITS_EVENT)]
    assert units["ph"] == "M" and units["pid"] == start["pid"]
    declared = units["args"]["units"]
    assert list(declared) == start["args"]["channels"]
    assert declared["cpu/percent"] == "%" and declared["memory/used_bytes"] == "B" and declared["swap/free_bytes"] == "B"
    assert all(declared[ch] == registry.unit_of(ch) for ch in declared)


def test_report_uses_the_declared_unit(tmp_path):
    from sysprof.report import unit_of

    path = tmp_path / "declared.json"
    w = ChromeTraceWriter(path)
    w.write({"name": "sysprof start", "ph": "i", "s": "g", "ts": T0, "pid": 1, "tid": 0,
             "args": {"interval_s": 1.0, "channels": ["dev/0/temp_bytes", "dev/0/speed_percent"]}})
    # the names say B and %; the trace says otherwise, and the trace is right
    w.write(units_event({"dev/0/temp_bytes": "\u00b0C", "dev/0/speed_percent": "Hz"}, 1))
    for i in range(3):
        w.write({"name": "dev/0", "ph": "C", "ts": T0 + i * 1_000_000, "pid": 1, "tid": 0,
                 "args": {"temp_bytes": 40.0 + i, "speed_percent": 1.5e9}})
    w.close()
    summary = json.loads(run_cli("report", "--json", path).stdout)
    assert summary["channels"]["dev/0/temp_bytes"]["unit"] == "\u00b0C"
    assert summary["channels"]["dev/0/speed_percent"]["unit"] == "Hz"
    proc = run_cli("report", path)
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line.split() for line in proc.stdout.splitlines() if line.startswith("  dev/")}
    assert rows["dev/0/temp_bytes"][1:3] == ["\u00b0C", "40"]
    assert rows["dev/0/speed_percent"][1:4] == ["Hz", "1.50", "GHz"]
    assert unit_of("dev/0/temp_bytes", {}) == "B" and unit_of("dev/0/temp_bytes", None) == "B"  # no declaration
    assert unit_of("dev/0/temp_bytes", {"dev/0/temp_bytes": "\u00b0C"}) == "\u00b0C"
