"""Damaged and hostile Chrome JSON traces (issue 26, items 4 and 5): ``sysprof repair`` skips only what is damaged,
resumes at the next event and never leaves less than the user had; ``read_trace`` / ``load_events`` / ``report`` /
``export`` / ``repair`` run in memory and time bounded by the events, answering bad input with one line."""
import gzip
import json
import os
import re
import warnings

import pytest

import sysprof.trace.chrome as chrome
from sysprof.trace.chrome import MAX_GAP, TraceDamageWarning, read_trace, repair_trace
from sysprof.trace.load import load_events

from cli_support import assert_one_line_error, run_cli


def counter(i):
    return {"name": "cpu", "ph": "C", "ts": 1000 * i, "pid": 1, "args": {"percent": float(i % 7)}}


def lines(n=1000):
    """Event lines of sysprof's layout (n of them: over the reader's batch size)."""
    return [json.dumps(counter(i), separators=(",", ":")) for i in range(n)]


def layout(event_lines):
    return "[\n" + ",\n".join(event_lines) + "\n]\n"


def write(path, text):
    data = text.encode("utf-8", "surrogateescape")
    path.write_bytes(gzip.compress(data) if str(path).endswith(".gz") else data)
    return path


def read_quiet(path):
    """read_trace's events and the messages of its TraceDamageWarnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        events = read_trace(path)
    return events, [str(w.message) for w in caught if issubclass(w.category, TraceDamageWarning)]


def strict(path):
    with (gzip.open(path, "rt") if str(path).endswith(".gz") else open(path)) as f:
        return json.load(f)


# ---------------------------------------------------------------------- repair keeps every complete event
@pytest.mark.parametrize("name", ["t.json", "t.json.gz"])
def test_two_nul_bytes_mid_trace_lose_only_their_event(tmp_path, name):
    ev = lines()
    ev[500] = ev[500][:10] + "\0\0" + ev[500][10:]
    path = write(tmp_path / name, layout(ev))
    before = path.read_bytes()
    want = [counter(i) for i in range(1000) if i != 500]
    events, said = read_quiet(path)
    assert events == want
    assert said == [f"{path}: 1 damaged event skipped"]

    proc = run_cli("repair", path)
    assert proc.returncode == 0, proc.stderr
    beside = tmp_path / name.replace("t.json", "t.repaired.json")
    assert proc.stdout == (f"sysprof: {path}: 999 events kept, 1 damaged event dropped; wrote {beside} "
                           f"(the trace itself is left as it was)\n")
    assert path.read_bytes() == before  # the original is never replaced by less
    assert strict(beside) == want
    assert sorted(os.listdir(tmp_path)) == sorted([name, beside.name])  # no temporary file left


def test_a_very_long_number_is_kept_digit_for_digit(tmp_path):
    ev = lines(10)
    big = "9" * 5000  # past int()'s 4300 digits
    ev[0] = '{"name":"big","ph":"i","ts":1,"args":{"n":' + big + "}}"
    path = write(tmp_path / "t.json", layout(ev)[:-3])  # cut: no closing bracket
    events, said = read_quiet(path)
    assert len(events) == 10 and said == []
    assert events[0]["args"]["n"] == float("inf") and events[1:] == [counter(i) for i in range(1, 10)]
    done = repair_trace(path)
    assert (done, done.dropped, done.replaced, done.output) == (10, 0, True, path)
    assert path.read_text() == layout(ev)  # every event as it was, now closed


def test_repair_resyncs_in_a_one_line_array_and_drops_wrongly_typed_events(tmp_path):
    good = [counter(i) for i in range(4)]
    text = ("[" + json.dumps(good[0]) + ', {"name": "x", "ts": \0}, ' + json.dumps(good[1]) + ', {"ph": 5}, '
            '{"name": "cpu", "ph": "C", "ts": "x"}, {"name": "cpu", "ph": "C", "ts": 1, "args": [1, 2]}, '
            '{"name": "cpu", "ph": "C", "ts": 1, "args": {"v": "text"}}, 7, ' + json.dumps(good[2]) + ", "
            + json.dumps(good[3]) + "]")
    path = write(tmp_path / "t.json", text)
    events, said = read_quiet(path)
    assert events == good and said == [f"{path}: 6 damaged events skipped"]
    done = repair_trace(path)
    assert (done, done.dropped, done.replaced) == (4, 6, False)
    assert path.read_text() == text and strict(tmp_path / "t.repaired.json") == good


def test_repair_never_writes_over_the_repaired_name(tmp_path):
    ev = lines(20)
    ev[3] = "{\0}"
    path = write(tmp_path / "t.json", layout(ev))
    taken = write(tmp_path / "t.repaired.json", "mine")
    proc = run_cli("repair", path)
    assert_one_line_error(proc, 1)
    assert proc.stderr == (f"sysprof: cannot repair {path}: {taken} exists (move it away and repair again); "
                           f"the trace is left as it was\n")
    assert taken.read_text() == "mine" and path.read_text() == layout(ev)
    assert sorted(os.listdir(tmp_path)) == ["t.json", "t.repaired.json"]


def test_repair_of_a_truncated_trace_still_replaces_it(tmp_path):
    path = write(tmp_path / "t.json", layout(lines(50))[:-30])  # the last event cut short
    done = repair_trace(path)
    assert (done, done.dropped, done.cut, done.replaced) == (49, 0, True, True)
    assert strict(path) == [counter(i) for i in range(49)]


def test_repair_compacts_a_pretty_printed_trace_and_keeps_its_text(tmp_path):
    events = [dict(counter(i), ph="i", args={"percent": i, "note": "caf\u00e9 \u2603"}) for i in range(300)]
    events.append({"name": "nan", "ph": "i", "ts": 5, "args": {"v": float("nan")}})
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events, "after": [1, 2]}, indent=2,
                               ensure_ascii=False), encoding="utf-8")
    assert len(read_trace(path)) == 301
    assert repair_trace(path) == 301
    text = path.read_text(encoding="ascii")  # non-ASCII escaped
    assert len(text.splitlines()) == 303  # '[', an event a line, ']'
    assert strict(path) == events[:-1] + [{"name": "nan", "ph": "i", "ts": 5, "args": {"v": None}}]


def test_an_invalid_utf8_byte_damages_its_event_only(tmp_path):
    ev = lines(10)
    ev[4] = ev[4].replace('"cpu"', '"c\udcffu"')  # the byte 0xff
    path = write(tmp_path / "t.json", layout(ev))
    events, said = read_quiet(path)
    assert events == [counter(i) for i in range(10) if i != 4] and said == [f"{path}: 1 damaged event skipped"]


# ---------------------------------------------------------------------- bounded reading of hostile input
class _Counted(chrome._Text):
    made = []

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        _Counted.made.append(self)


@pytest.fixture
def counted(monkeypatch):
    _Counted.made = []
    monkeypatch.setattr(chrome, "_Text", _Counted)
    return _Counted.made


BOMB = 16 << 20  # white space inflated from ~16 KB: enough to show the bound (200 MiB behaves the same)


def bomb(path, head=b"[\n", tail=b"\n]\n"):
    with gzip.open(path, "wb", compresslevel=9) as f:
        f.write(head)
        for _ in range(BOMB >> 20):
            f.write(b" " * (1 << 20))
        f.write(tail)
    assert path.stat().st_size < 100_000
    return path


def test_a_whitespace_bomb_is_refused_after_a_bounded_read(tmp_path, counted):
    path = bomb(tmp_path / "bomb.json.gz")
    with pytest.raises(ValueError, match="not a Chrome trace: no event read .reading stopped: no event in the 1 "
                                         "MiB of text after byte 0; the rest is not read.$"):
        load_events(path)
    assert len(counted) == 1 and counted[0].bytes <= MAX_GAP + 2 * chrome._TEXT_CHUNK < BOMB

    for command in ("report", "export", "repair"):
        extra = ["-o", tmp_path / "out.csv"] if command == "export" else []
        proc = run_cli(command, path, *extra)
        assert_one_line_error(proc, 1)
        verb = "repair" if command == "repair" else "read"
        assert proc.stderr.startswith(f"sysprof: cannot {verb} {path}: ") and "not a Chrome trace" in proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["bomb.json.gz"]


def test_reading_stops_inside_a_bomb_after_events(tmp_path, counted):
    first = json.dumps(counter(1)).encode()
    path = bomb(tmp_path / "t.json.gz", head=b"[\n" + first + b",\n", tail=b"\n" + json.dumps(counter(2)).encode())
    events, said = read_quiet(path)
    assert events == [counter(1)]
    assert said == [f"{path}: reading stopped: no event in the 1 MiB of text after byte {len(first) + 2:,}; the "
                    f"rest is not read"]
    assert counted[0].bytes <= len(first) + MAX_GAP + 2 * chrome._TEXT_CHUNK
    proc = run_cli("report", path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == f"sysprof: warning: {said[0]}\n"
    done = repair_trace(path)  # what it read goes beside: the rest may hold events
    assert (done, done.replaced, done.stopped) == (1, False, said[0].split(": ", 1)[1])
    assert strict(tmp_path / "t.repaired.json.gz") == [counter(1)]


@pytest.mark.parametrize("text", ["[" * 100_000, "{" * 100_000, '{"traceEvents": ' + "[" * 100_000,
                                  "[" + "{\"a\": " * 100_000])
def test_deep_nesting_is_a_one_line_error(tmp_path, text):
    path = write(tmp_path / "deep.json", text)
    why = "not a Chrome trace|has no 'traceEvents' list"
    with pytest.raises(ValueError, match=why):
        read_trace(path)
    for command in ("report", "repair"):
        proc = run_cli(command, path)
        assert_one_line_error(proc, 1)
        assert re.search(why, proc.stderr)
    assert path.read_text() == text


def test_deep_nesting_inside_a_trace_drops_that_event(tmp_path):
    ev = lines(10)
    ev[5] = '{"name":"x","ph":"i","ts":1,"args":{"a":' + "[" * 50_000 + "]" * 50_000 + "}}"
    path = write(tmp_path / "t.json", layout(ev))
    events, said = read_quiet(path)
    assert events == [counter(i) for i in range(10) if i != 5] and said == [f"{path}: 1 damaged event skipped"]


def test_report_skips_wrongly_typed_events_with_a_warning(tmp_path):
    ev = lines(20)
    ev[1] = '{"ph": 5, "ts": 2}'
    ev[2] = '{"name": "cpu", "ph": "C", "ts": "x", "args": {"percent": 1}}'
    ev[3] = '{"name": "cpu", "ph": "C", "ts": 4, "args": [1, 2]}'
    ev[4] = '{"name": "sysprof start", "ph": "i", "ts": 1, "args": [1]}'
    ev[5] = '{"name": "b", "ph": "B", "ts": 1, "args": 5}'
    path = write(tmp_path / "t.json", layout(ev))
    proc = run_cli("report", "--json", path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == f"sysprof: warning: {path}: 5 damaged events skipped\n"
    assert json.loads(proc.stdout)["channels"]["cpu/percent"]["max"] == 6.0


def test_wrongly_typed_sysprof_metadata_is_no_internal_error(tmp_path):
    ev = lines(20)
    ev[0] = '{"name": "sysprof start", "ph": "i", "ts": 0, "args": {"channels": 5, "errors": 7, "interval_s": "x"}}'
    ev.append('{"name": "sysprof stop", "ph": "i", "ts": 20000, "args": {"stats": 5}}')
    path = write(tmp_path / "t.json", layout(ev))
    proc = run_cli("report", path)
    assert proc.returncode == 0, proc.stderr
    assert "cpu/percent" in proc.stdout


@pytest.mark.parametrize("indent", [None, 2])
def test_damage_in_a_pretty_printed_or_one_line_trace_loses_only_its_event(tmp_path, indent):
    events = [dict(counter(i), args={"percent": float(i)}) for i in range(2000)]
    text = json.dumps({"traceEvents": events, "schemaVersion": 1}, indent=indent)
    text = text.replace('"percent": 700.0', '"percent": 7\x0000.0')  # a NUL inside event 700
    path = write(tmp_path / "t.json", text)
    got, said = read_quiet(path)
    assert got == events[:700] + events[701:] and said == [f"{path}: 1 damaged event skipped"]


def test_a_corrupt_gzip_member_ends_the_text_with_what_it_decoded(tmp_path):
    first = gzip.compress(layout(lines(3000))[:-3].encode())  # no closing bracket
    path = tmp_path / "t.json.gz"
    path.write_bytes(first + b"\x1f\x8b\x09\x00garbage, not deflate" + b"[" * 200_000)
    events, said = read_quiet(path)
    assert events == [counter(i) for i in range(3000)] and said == []


def test_an_endless_string_is_damage_after_a_bounded_read(tmp_path, counted, monkeypatch):
    monkeypatch.setattr(chrome, "MAX_EVENT", 1 << 20)  # 16 MiB by default: the same bound, cheaper to show
    first = json.dumps(counter(1)).encode()
    path = bomb(tmp_path / "t.json.gz", head=b"[\n" + first + b',\n{"name": "', tail=b'"}]')
    events, said = read_quiet(path)
    assert events == [counter(1)]
    assert said == [f"{path}: 1 damaged event skipped", f"{path}: reading stopped: no event in the 1 MiB of text "
                    f"after byte {len(first) + 2:,}; the rest is not read"]
    assert counted[0].bytes <= 2 * chrome.MAX_EVENT + 2 * chrome._TEXT_CHUNK < BOMB


@pytest.mark.parametrize("text", ['{"schemaVersion": 1, "deviceProperties": [{"name": "x', '{"traceEvents": 5}',
                                  '{"a": 1}', '{"a": \0, "traceEvents": []}'])
def test_an_object_without_its_trace_events_is_no_trace(tmp_path, text):
    path = write(tmp_path / "t.json", text)
    with pytest.raises(ValueError, match="'traceEvents'"):
        read_trace(path)


def test_a_gzip_trace_whose_checksum_does_not_match_keeps_its_events(tmp_path):
    """A flipped byte in a .json.gz: the whole file inflates, only its checksum fails at the end. Every event that
    reads whole is kept, a warning says the file is damaged, and repair never replaces the original."""
    import gzip
    import warnings

    from sysprof.trace.chrome import TraceDamageWarning, read_trace, repair_trace

    events = [{"name": "c", "ph": "C", "ts": k, "pid": 1, "tid": 0, "args": {"v": k}} for k in range(200)]
    path = tmp_path / "t.json.gz"
    raw = bytearray(gzip.compress(("[\n" + ",\n".join(json.dumps(e) for e in events) + "\n]\n").encode()))
    raw[-6] ^= 0x40  # inside the CRC-32 of the trailer
    path.write_bytes(bytes(raw))
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        assert read_trace(path) == events
    assert any(isinstance(w.message, TraceDamageWarning) and "checksum" in str(w.message) for w in got)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = repair_trace(path)
    assert not result.replaced and path.read_bytes() == bytes(raw)  # the original stays as it was
