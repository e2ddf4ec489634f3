"""The device filter (sysprof/sampling/devices.py): its rule, and both backends' disks and NICs on fixture trees
(native: csrc/sources/{diskstats,netdev}.cpp via Config options; psutil: sampling/portable/host.py)."""
import sys
import types

import pytest

import sysprof
from sysprof.sampling.devices import DeviceFilter, check_devices
from test_sampler_fixtures import OFF, Tree, devices, exact, take

# tests/fixtures/disk_formats/v1: whole disks (in sys/block) and partitions
DISKS = {"hda", "loop0", "sda", "md127", "cciss/c0d0", "vda", "nvme0n1"}
# tests/fixtures/net_formats/v1
NICS = {"lo", "eth0", "eth1", "vnet:0", "br-3f2a9c1d7e6b"}


def kept(f, source, names):
    return {n for n in names if f.keeps(source, n)}


def test_default_leaves_loop_ram_zram_and_lo_out():
    f = DeviceFilter()
    assert kept(f, "disk", DISKS | {"ram0", "zram1", "loop12"}) == DISKS - {"loop0"}
    assert kept(f, "net", NICS | {"lo0"}) == NICS - {"lo"} | {"lo0"}  # only lo itself
    assert DeviceFilter([]).rules("net") == DeviceFilter(None).rules("net") == [("lo", False)]


def test_keeping_globs_restrict_their_source_and_bring_defaults_back():
    f = DeviceFilter(["disk/nvme*", "disk/loop*"])
    assert kept(f, "disk", DISKS) == {"nvme0n1", "loop0"}
    assert kept(f, "net", NICS) == NICS - {"lo"}  # no net glob: net keeps its default
    f = DeviceFilter(["sd*"])  # unscoped: both sources keep only what it matches
    assert kept(f, "disk", DISKS) == {"sda"} and kept(f, "net", NICS) == set()
    assert kept(DeviceFilter(["*"]), "disk", DISKS) == DISKS
    assert kept(DeviceFilter(["*"]), "net", NICS) == NICS
    assert kept(DeviceFilter(["cciss/*"]), "disk", DISKS) == {"cciss/c0d0"}  # '/' in a name, not a source


def test_excluding_globs_win():
    f = DeviceFilter(["*", "!eth*", "!disk/md*"])
    assert kept(f, "net", NICS) == {"lo", "vnet:0", "br-3f2a9c1d7e6b"}
    assert kept(f, "disk", DISKS) == DISKS - {"md127"}
    f = DeviceFilter(["!net/br-*"])
    assert kept(f, "net", NICS) == {"eth0", "eth1", "vnet:0"}
    assert kept(f, "disk", DISKS) == DISKS - {"loop0"}
    assert f.native_options() == ["device:disk:-loop*", "device:disk:-ram*", "device:disk:-zram*",
                                  "device:net:-br-*", "device:net:-lo"]
    assert DeviceFilter(["sda"]).native_options()[:2] == ["device:disk:+sda", "device:disk:-loop*"]


@pytest.mark.parametrize("bad", ["sda", ["sda", 3], [""], ["!"], ["disk/"], ["a\0b"]])
def test_bad_devices_refused(bad):
    with pytest.raises(ValueError, match="devices"):
        check_devices(bad)
    with pytest.raises(ValueError, match="devices"):
        sysprof.Sampler(devices=bad, backend="psutil")


# ------------------------------------------------------------------------------ native, fixture trees
def native(tree, **kw):
    return sysprof.Sampler(backend="native", proc_root=tree.proc, sys_root=tree.sys, **dict(OFF, capacity=64, **kw))


@pytest.mark.parametrize("globs, disks", [
    (None, DISKS - {"loop0"}),
    (["*"], DISKS),
    (["disk/loop*", "disk/sd*"], {"loop0", "sda"}),
    (["!vda", "!disk/md*"], DISKS - {"loop0", "vda", "md127"}),
    (["cciss/c0d0", "net/*"], {"cciss/c0d0"}),
])
def test_native_disks(tmp_path, globs, disks):
    tree = Tree("disk_formats", tmp_path)
    s = native(tree, disk=True, devices=globs)
    assert devices(s.channels, "disk/") == disks
    assert s.device_filter.globs == tuple(globs or ())
    tree.apply("v2")
    row, _ = take(s)
    if "sda" in disks:  # the kept disks' values are those of the unfiltered test (test_disk_formats_...)
        exact("disk/sda/read_count", row["disk/sda/read_count"], 1100)


@pytest.mark.parametrize("globs, nics", [
    (None, NICS - {"lo"}),
    (["*"], NICS),
    (["lo", "eth*"], {"lo", "eth0", "eth1"}),
    (["!net/eth1", "!vnet*"], {"eth0", "br-3f2a9c1d7e6b"}),
])
def test_native_nics(tmp_path, globs, nics):
    tree = Tree("net_formats", tmp_path)
    s = native(tree, net=True, devices=globs)
    assert devices(s.channels, "net/") == nics
    tree.apply("v2")
    row, _ = take(s)
    if "eth1" in nics:  # lines after skipped ones still reach their device
        exact("net/eth1/bytes_recv", row["net/eth1/bytes_recv"], 123466789)
    if "lo" in nics:
        exact("net/lo/bytes_recv", row["net/lo/bytes_recv"], 133456)


def test_native_full_tree_default(tmp_path):
    """tests/fixtures/full: lo and eth0, disk sda (and partition sda1): the default keeps eth0 and sda."""
    tree = Tree("full", tmp_path)
    s = native(tree, disk=True, net=True)
    assert devices(s.channels, "net/") == {"eth0"} and devices(s.channels, "disk/") == {"sda"}
    s = native(tree, disk=True, net=True, devices=["*"])
    assert devices(s.channels, "net/") == {"lo", "eth0"}


# ------------------------------------------------------------------------------ psutil, a stubbed psutil
def test_psutil_backend_same_rule(monkeypatch, tmp_path):
    from sysprof.sampling.portable import host

    counters = types.SimpleNamespace(read_bytes=1, write_bytes=2, read_count=3, write_count=4, busy_time=5,
                                     read_time=6, write_time=7, bytes_recv=1, bytes_sent=2, packets_recv=3,
                                     packets_sent=4, errin=0, errout=0, dropin=0, dropout=0)
    disks = {n: counters for n in ("sda", "loop0", "ram0", "zram0", "nvme0n1")}
    nics = {n: counters for n in ("lo", "eth0", "docker0")}
    fake = types.SimpleNamespace(disk_io_counters=lambda **_: dict(disks), net_io_counters=lambda **_: dict(nics))
    monkeypatch.setattr(host, "psutil", fake)
    block = tmp_path / "block"
    block.mkdir()
    for n in disks:
        (block / n).mkdir()

    def channels(globs):
        s = host.PsutilSampler(interval=0.01, capacity=8, pid=None, sys_root=str(tmp_path), disk=True, net=True,
                               device_filter=DeviceFilter(globs))
        return devices(s.channels, "disk/"), devices(s.channels, "net/")

    assert channels(None) == ({"sda", "nvme0n1"}, {"eth0", "docker0"})
    assert channels(["*"]) == (set(disks), set(nics))
    assert channels(["disk/nvme*", "!docker*"]) == ({"nvme0n1"}, {"eth0"})
    assert sys.modules["sysprof.sampling.devices"].DEFAULT_EXCLUDED["net"] == ("lo",)
