"""Names that are not UTF-8 (issue 26, item 3): the kernel cuts a comm at 15 bytes, mid-character for a name of 8
or more Cyrillic letters, and interface names are bytes. Every such string reaches Python as text with U+FFFD for
the bytes that are not UTF-8 (sysprof.text.text, csrc/py_text.hpp), never a UnicodeDecodeError; and
`sysprof record` of a program so named records it, closes its trace and exits with the program's status."""
import json
import os
import subprocess
import sys

import pytest

from cli_support import run_cli
from sysprof.text import text
from sysprof.trace.chrome import read_trace
from test_sampler_fixtures import Tree, open_sampler

#: "Приветмиртест" as the kernel keeps it: 15 bytes, the last one the first half of "и"
CUT = "Приветмиртест".encode()[:15]
CUT_TEXT = "Приветм\ufffd"


def test_text_helper():
    assert text(CUT) == CUT_TEXT
    assert text(bytearray(b"eth\xff0")) == "eth\ufffd0"
    assert text(os.fsdecode(CUT)) == CUT_TEXT  # surrogateescape (psutil, os.fsdecode) back to its bytes
    assert text("a\ud800b") == "a\ufffd\ufffd\ufffdb"  # a lone surrogate that no bytes escaped
    assert text("ünïcode") == "ünïcode" and text(42) == "42"


def test_native_strings_with_bytes_that_are_not_utf8(tmp_path):
    tree = Tree("process_tree_pss", tmp_path)
    stat = (tmp_path / "process_tree_pss/proc/101/stat").read_bytes()
    tree.write("101/stat", stat.replace(b"(pt_data_worker)", b"(" + CUT + b")"))
    tree.write("net/dev", (b"Inter-|   Receive |  Transmit\n face |bytes packets errs drop fifo frame compressed "
                           b"multicast|bytes packets errs drop fifo colls carrier compressed\n"
                           b"  et\xffh0: 1 2 0 0 0 0 0 0 3 4 0 0 0 0 0 0\n"))
    s, _ = open_sampler(tree, process_tree=True, net=True, pid=100, process_tree_slots=4)
    s.sample()
    comms = {m["pid"]: m["comm"] for m in s.members if "pid" in m}
    assert comms[101] == CUT_TEXT and comms[100] == "train.py"
    assert "net/et\ufffdh0/bytes_recv" in s.channels
    assert isinstance(s.errors, dict)
    s.stop()


@pytest.mark.skipif(not os.path.exists("/proc/self/comm"), reason="needs /proc/self/comm")
def test_record_a_program_whose_comm_is_cut_mid_character(tmp_path):
    exe = tmp_path / "Приветмиртест"  # exec'd by this name, the kernel's comm is its first 15 bytes
    exe.symlink_to(os.path.realpath(sys.executable))
    out = tmp_path / "t.json"
    proc = run_cli("record", "--all", "-q", "-o", out, "--", exe, "-c", "import time; time.sleep(2); exit(3)",
                   timeout=120)
    assert proc.returncode == 3, proc.stderr  # the program's status: it ran, and was waited for
    assert "internal error" not in proc.stderr and "stopped early" not in proc.stderr, proc.stderr
    events = read_trace(str(out))  # closed: read whole
    stop = [e for e in events if e.get("name") == "sysprof stop"]
    assert len(stop) == 1 and stop[0]["args"]["returncode"] == 3
    members = stop[0]["args"]["process_tree_members"]
    assert CUT_TEXT in [m.get("comm") for m in members]
    json.loads(out.read_text(encoding="utf-8"))  # valid UTF-8 JSON


@pytest.mark.parametrize("suffix", [".json", ".pftrace"])
def test_a_command_line_that_is_not_utf8_is_recorded_in_every_format(tmp_path, suffix):
    """sys.argv keeps bytes that are not UTF-8 as lone surrogates: protobuf refused them (the .pftrace recording
    stopped at its start event), strict JSON parsers too. They are written as U+FFFD."""
    if suffix == ".pftrace":
        pytest.importorskip("perfetto")
    trace = tmp_path / f"t{suffix}"
    arg = os.fsdecode(b"\xff")
    proc = run_cli("record", "-q", "--cpu", "-o", trace, "--", "sh", "-c", "sleep 0.5", arg, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "stopped early" not in proc.stderr
    from sysprof.report import TraceData
    from sysprof.trace.load import load_events

    data = TraceData(load_events(trace))
    assert data.meta["command_line"] == "sh -c 'sleep 0.5' '\ufffd'"
    assert "failure" not in data.stop and data.stop["returncode"] == 0  # recorded to the end, not stopped early
    if suffix == ".json":
        assert "\\ud" not in trace.read_text(encoding="utf-8")  # strict: no lone surrogate escapes
