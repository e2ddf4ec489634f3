"""The source registry (sysprof/sampling/registry.py) against everything that must agree with it: the
native extension's registered sources, the channels both backends yield, the channel table (docs/reference.md), and
the units the report would otherwise infer from names."""
import itertools
import os
import re

import pytest

from sysprof.sampling import registry
from sysprof.sampling.registry import SOURCES, channel_spec, unit_of

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")


def _expand(text: str):
    """Brace expansion as the channel table writes channel sets: ``a/{b,c}_d`` -> ``a/b_d``, ``a/c_d``."""
    parts = re.split(r"\{([^{}]*)\}", text)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(c) for c in itertools.product(*choices)]


def _readme_table():
    """source -> set of channel patterns named in the channel table (docs/reference.md) (cells in backticks)."""
    with open(os.path.join(ROOT, "docs", "reference.md"), encoding="utf-8") as f:
        text = f.read()
    start = text.index("| source | file | channels |")
    rows = {}
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        source = cells[0].strip("`")
        names = set()
        for code in re.findall(r"`([^`]+)`", cells[2]):
            if "/" in code and not code.startswith("/"):
                names.update(_expand(code))
        rows[source] = names
    return rows


def test_readme_channel_table_is_the_registry():
    table = _readme_table()
    assert list(table) == list(SOURCES)  # every source, in registry (row) order
    for name, spec in SOURCES.items():
        assert table[name] == {c.pattern for c in spec.channels}, name


def test_native_extension_registers_the_same_sources():
    native = pytest.importorskip("sysprof._native")
    assert sorted(native.source_names()) == sorted(SOURCES)


def test_specs_are_well_formed():
    seen = set()
    for spec in SOURCES.values():
        assert spec.help and spec.file and spec.channels
        assert spec.flag == "--" + spec.name.replace("_", "-")
        for c in spec.channels:
            assert c.kind in registry.KINDS and c.help and c.field, c
            assert c.pattern not in seen, c.pattern
            seen.add(c.pattern)
            assert (c.kind == "rate") == c.pattern.endswith("_per_second"), c.pattern
            if c.pattern.endswith("_total") and c.pattern != "load/procs_total":  # a count of tasks, from loadavg
                assert c.kind in ("counter", "counter32", "ticks"), c.pattern
    assert registry.DEFAULT_SOURCES == ("cpu", "memory", "disk", "net")


def test_channel_lookup():
    assert channel_spec("disk/nvme0n1/read_bytes_per_second").unit == "B/s"
    assert channel_spec("disk/sda/read_bytes").kind == "counter32"
    assert unit_of("cpu/3/percent") == "%"
    assert unit_of("gpu/0/energy_joules") == "J"
    assert unit_of("pressure/io/full_seconds_per_second") == "s/s"
    assert unit_of("disk/sda/extra/read_bytes") is None  # a device name has no '/'
    assert unit_of("memory/virtual/used_gb") is None  # a Composer name is not a sampler channel
    assert registry.source_of("swap/free_bytes") == "memory"
    assert registry.source_available("memory", ["swap/free_bytes"])
    assert not registry.source_available("gpu", ["cpu/percent"])


def _native_all_sources():
    sysprof = pytest.importorskip("sysprof")
    root = os.path.join(FIXTURES, "full", "v1")
    kw = {name: True for name in SOURCES if name != "gpu"}
    for spec in SOURCES.values():
        for opt in spec.options:
            kw[opt.name] = True
    return sysprof.Sampler(0.01, backend="native", proc_root=os.path.join(root, "proc"),
                           sys_root=os.path.join(root, "sys"), **kw)


def test_every_native_channel_is_declared_with_the_unit_its_name_says():
    from sysprof.report import infer_unit

    s = _native_all_sources()
    assert s.channels
    for ch in s.channels:
        spec = channel_spec(ch)
        assert spec is not None, ch
        assert spec.unit == infer_unit(ch), ch  # the names keep saying their units


def test_every_psutil_channel_is_declared():
    sysprof = pytest.importorskip("sysprof")
    s = sysprof.Sampler(0.01, backend="psutil", per_cpu=True, load=True, process=True, process_tree=True)
    for ch in s.channels:
        assert channel_spec(ch) is not None, ch


def test_the_flat_package_module_paths_are_gone():
    import importlib

    for old in ("chrome_trace", "sampler", "callback", "schedule", "marker", "trace_handler", "json_trace_handler",
                "system_profiler"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(f"sysprof.{old}")


def test_docs_channel_list_is_generated_from_the_registry():
    from sysprof.sampling.registry import channels_markdown

    with open(os.path.join(ROOT, "docs", "channels.md"), encoding="utf-8") as f:
        assert f.read() == channels_markdown(), "regenerate: python -m sysprof.sampling.registry > docs/channels.md"
