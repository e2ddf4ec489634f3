"""The disk source's two ways of reading the kept disks (csrc/sources/diskstats.cpp): /proc/diskstats (every block
device, by name) or each kept disk's own /sys/block/<disk>/stat (the same statistics without "major minor name",
Documentation/admin-guide/iostats.rst). SYSPROF_DISK_FILES=diskstats|sysfs forces one, auto (unset) times both at
open. Both must give the same channels and the same values: each test runs the same tree and the same literal
expectations through each way.

The trees are written here (the helpers of tests/test_sampler_fixtures.py do the reading and the checks). A sysfs
file is rewritten in place (same inode), as the kernel's are re-rendered; a disk that goes away has no line in
/proc/diskstats and an empty stat file (the kernel's file would read ENODEV, which a regular file cannot do: both
are "no disk" to the source).
"""

import pytest

from test_sampler_fixtures import DISK_SUFFIXES, check_error, check_rate, exact, nan, open_sampler, take
from test_sampler_fixtures_memory_disk_net import check_disk

MODES = ("diskstats", "sysfs")

# name -> (major, minor, statistics); partitions and a loop device among the whole disks, as the kernel lists them.
# sda and nvme0n1: 17 statistics (5.5+); cciss/c0d0: 11 (2.6+, sysfs name cciss!c0d0); loop0, md127 idle.
V1 = {
    "sda": (8, 0, [1000, 10, 20000, 500, 2000, 20, 40000, 900, 0, 1800, 1400, 0, 0, 0, 0, 0, 0]),
    "sda1": (8, 1, [900, 10, 19000, 450, 1900, 20, 39000, 850, 0, 1700, 1300, 0, 0, 0, 0, 0, 0]),
    "nvme0n1": (259, 0, [50000, 0, 4000000, 20000, 60000, 0, 8000000, 30000, 0, 40000, 50000, 0, 0, 0, 0, 10, 5]),
    "nvme0n1p1": (259, 1, [49000, 0, 3900000, 19000, 59000, 0, 7900000, 29000, 0, 39000, 49000, 0, 0, 0, 0, 0, 0]),
    "loop0": (7, 0, [12, 0, 24, 1, 0, 0, 0, 0, 0, 4, 1, 0, 0, 0, 0, 0, 0]),
    "md127": (9, 127, [500, 0, 4000, 0, 600, 0, 4800, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
    "cciss/c0d0": (104, 0, [300, 0, 6000, 90, 400, 0, 8000, 130, 0, 200, 220]),
}
WHOLE = ("sda", "nvme0n1", "loop0", "md127", "cciss/c0d0")  # the entries of /sys/block, in /proc/diskstats order
V2 = dict(V1)
# sda: reads 1000->1100, sectors read 20000->20800, read ms 500->600, writes 2000->2050, sectors written
# 40000->41000, write ms 900->1700, io ms 1800->2000
V2["sda"] = (8, 0, [1100, 10, 20800, 600, 2050, 20, 41000, 1700, 0, 2000, 1500, 0, 0, 0, 0, 0, 0])
# nvme0n1: reads +1000, sectors read +100000, writes +500, sectors written +200000, io ms +700
V2["nvme0n1"] = (259, 0, [51000, 0, 4100000, 20500, 60500, 0, 8200000, 30600, 0, 40700, 51000, 0, 0, 0, 0, 12, 6])
# cciss/c0d0: reads +10, sectors +200 / +400, writes +20, io ms +30
V2["cciss/c0d0"] = (104, 0, [310, 0, 6200, 100, 420, 0, 8400, 140, 0, 230, 250])

# literal totals and deltas of V1 -> V2 (rb/wb = sectors x 512, times = ms / 1000)
WANT_V2 = {
    "sda": dict(read_bytes=20800 * 512, write_bytes=41000 * 512, read_count=1100, write_count=2050, busy=2.0,
                read_time=0.6, write_time=1.7, d_rb=800 * 512, d_wb=1000 * 512, d_rc=100, d_wc=50, d_busy=0.2),
    "nvme0n1": dict(read_bytes=4100000 * 512, write_bytes=8200000 * 512, read_count=51000, write_count=60500,
                    busy=40.7, read_time=20.5, write_time=30.6, d_rb=100000 * 512, d_wb=200000 * 512, d_rc=1000,
                    d_wc=500, d_busy=0.7),
    "cciss/c0d0": dict(read_bytes=6200 * 512, write_bytes=8400 * 512, read_count=310, write_count=420, busy=0.23,
                       read_time=0.1, write_time=0.14, d_rb=200 * 512, d_wb=400 * 512, d_rc=10, d_wc=20,
                       d_busy=0.03),
    "loop0": dict(read_bytes=24 * 512, write_bytes=0, read_count=12, write_count=0, busy=0.004, read_time=0.001,
                  write_time=0.0, d_rb=0, d_wb=0, d_rc=0, d_wc=0, d_busy=0),
}


class DiskTree:
    """proc/diskstats and sys/block/<disk>/stat under tmp_path, rewritten in place."""

    def __init__(self, tmp_path, lines=V1, whole=WHOLE):
        self.root = tmp_path / "tree"
        self.whole = whole
        for name in whole:
            (self.root / "sys" / "block" / name.replace("/", "!")).mkdir(parents=True)
        (self.root / "proc").mkdir(parents=True)
        self.write(lines)

    proc = property(lambda self: str(self.root / "proc"))
    sys = property(lambda self: str(self.root / "sys"))

    def stat_path(self, name):
        return self.root / "sys" / "block" / name.replace("/", "!") / "stat"

    @staticmethod
    def _in_place(path, text):
        if path.exists():
            with open(path, "r+") as f:
                f.write(text)
                f.truncate()
        else:
            path.write_text(text)

    def write(self, lines, proc=True, sys=True):
        """Both files from {name: (major, minor, stats)}; a whole disk missing from `lines` is gone (no line, an
        empty stat file). proc/sys False: leave that file as it is."""
        if proc:
            self._in_place(self.root / "proc" / "diskstats", "".join(
                f"{ma:4d} {mi:7d} {n} " + " ".join(map(str, st)) + "\n" for n, (ma, mi, st) in lines.items()))
        if sys:
            for name in self.whole:
                path = self.stat_path(name)
                if not path.parent.exists():
                    continue
                st = lines.get(name, (0, 0, None))[2]
                # the kernel's part_stat_show: "%8lu %8lu ..." and a newline
                self._in_place(path, "" if st is None else " ".join(f"{v:8d}" for v in st) + "\n")


def channels_of(*disks):
    return tuple(f"disk/{d}/{x}" for d in disks for x in DISK_SUFFIXES)


@pytest.fixture
def mode_env(monkeypatch):
    def set_mode(mode):
        if mode == "auto":
            monkeypatch.delenv("SYSPROF_DISK_FILES", raising=False)
        else:
            monkeypatch.setenv("SYSPROF_DISK_FILES", mode)
    return set_mode


@pytest.mark.parametrize("mode", MODES + ("auto",))
def test_same_channels_and_values(tmp_path, mode_env, mode):
    mode_env(mode)
    tree = DiskTree(tmp_path)
    s, built = open_sampler(tree, disk=True)
    assert "disk" not in s.errors
    # whole disks only (sda1 and nvme0n1p1 are partitions), in /proc/diskstats order, whichever file is read
    assert s.channels == channels_of("sda", "nvme0n1", "loop0", "md127", "cciss/c0d0")
    tree.write(V2)
    row, now = take(s)
    for dev, want in WANT_V2.items():
        check_disk(row, dev, want, built, now)
    exact("disk/md127/read_bytes", row["disk/md127/read_bytes"], 4000 * 512)


@pytest.mark.parametrize("mode", MODES)
def test_each_way_reads_its_own_file(tmp_path, mode_env, mode):
    # V2 written to the other way's file only: nothing moves; then to its own: V2
    mode_env(mode)
    tree = DiskTree(tmp_path)
    s, _ = open_sampler(tree, disk=True)
    tree.write(V2, proc=mode == "sysfs", sys=mode == "diskstats")
    row, _ = take(s)
    exact("disk/sda/read_count", row["disk/sda/read_count"], 1000)
    exact("disk/sda/read_count_per_second", row["disk/sda/read_count_per_second"], 0.0)
    tree.write(V2, proc=mode == "diskstats", sys=mode == "sysfs")
    row, _ = take(s)
    exact("disk/sda/read_count", row["disk/sda/read_count"], 1100)
    exact("disk/cciss/c0d0/write_bytes", row["disk/cciss/c0d0/write_bytes"], 8400 * 512)


@pytest.mark.parametrize("mode", MODES)
def test_disk_gone_and_back(tmp_path, mode_env, mode):
    mode_env(mode)
    tree = DiskTree(tmp_path)
    s, _ = open_sampler(tree, disk=True)
    gone = {k: v for k, v in V2.items() if k not in ("sda", "sda1")}
    tree.write(gone)
    row, t2 = take(s)
    for x in DISK_SUFFIXES:
        nan("disk/sda/" + x, row["disk/sda/" + x])
    exact("disk/nvme0n1/read_count", row["disk/nvme0n1/read_count"], 51000)
    # back, counters reset (a re-attached disk): reads 7, sectors read 56, io ms 3; no rate until a second read
    v3 = dict(gone, sda=(8, 0, [7, 0, 56, 2, 0, 0, 0, 0, 0, 3, 2, 0, 0, 0, 0, 0, 0]))
    tree.write(v3)
    row, t3 = take(s)
    exact("disk/sda/read_count", row["disk/sda/read_count"], 7)
    exact("disk/sda/read_bytes", row["disk/sda/read_bytes"], 56 * 512)
    exact("disk/sda/busy_time_seconds", row["disk/sda/busy_time_seconds"], 0.003)
    nan("disk/sda/read_count_per_second", row["disk/sda/read_count_per_second"])
    # reads 7 -> 17, sectors 56 -> 136, io ms 3 -> 13
    v4 = dict(v3, sda=(8, 0, [17, 0, 136, 4, 0, 0, 0, 0, 0, 13, 4, 0, 0, 0, 0, 0, 0]))
    tree.write(v4)
    row, t4 = take(s)
    check_rate("disk/sda/read_count_per_second", row["disk/sda/read_count_per_second"], 10, t3, t4)
    check_rate("disk/sda/read_bytes_per_second", row["disk/sda/read_bytes_per_second"], 80 * 512, t3, t4)
    check_rate("disk/sda/busy_time_seconds_per_second", row["disk/sda/busy_time_seconds_per_second"], 0.01, t3, t4,
               cap=1.0)
    exact("disk/nvme0n1/read_count_per_second", row["disk/nvme0n1/read_count_per_second"], 0.0)


@pytest.mark.parametrize("mode", ("sysfs", "auto"))
def test_missing_sys_stat_reads_diskstats(tmp_path, mode_env, mode):
    # one kept disk without its stat file: /proc/diskstats for all; said in errors only when sysfs was asked for
    mode_env(mode)
    tree = DiskTree(tmp_path)
    tree.stat_path("nvme0n1").unlink()
    s, _ = open_sampler(tree, disk=True)
    assert s.channels == channels_of("sda", "nvme0n1", "loop0", "md127", "cciss/c0d0")
    if mode == "sysfs":
        check_error(s, "disk")
        assert "nvme0n1/stat" in s.errors["disk"] and "/proc/diskstats is read" in s.errors["disk"]
    else:
        assert "disk" not in s.errors
    tree.write(V2, sys=False)  # /proc/diskstats alone moves
    row, now = take(s)
    exact("disk/sda/read_count", row["disk/sda/read_count"], 1100)
    exact("disk/nvme0n1/read_count", row["disk/nvme0n1/read_count"], 51000)


def test_filtered_disks_need_only_their_own_files(tmp_path, mode_env):
    # the disks left out (loop0, md127, cciss/c0d0) have no stat file: the kept ones still go through sysfs
    mode_env("sysfs")
    tree = DiskTree(tmp_path)
    for name in ("loop0", "md127", "cciss/c0d0"):
        tree.stat_path(name).unlink()
    s, built = open_sampler(tree, disk=True, devices=["disk/sd*", "disk/nvme*"])
    assert "disk" not in s.errors
    assert s.channels == channels_of("sda", "nvme0n1")
    tree.write(V2, proc=False)  # the stat files alone move
    row, now = take(s)
    check_disk(row, "sda", WANT_V2["sda"], built, now)
    check_disk(row, "nvme0n1", WANT_V2["nvme0n1"], built, now)


def test_malformed_stat_file_while_running(tmp_path, mode_env):
    mode_env("sysfs")
    tree = DiskTree(tmp_path)
    s, _ = open_sampler(tree, disk=True)
    tree.write(V2)
    tree._in_place(tree.stat_path("sda"), "       1        2        3\n")  # 3 statistics: no disk line
    row, _ = take(s)
    check_error(s, "disk")
    assert str(tree.stat_path("sda")) in s.errors["disk"] and "malformed" in s.errors["disk"]
    nan("disk/sda/read_count", row["disk/sda/read_count"])
    exact("disk/nvme0n1/read_count", row["disk/nvme0n1/read_count"], 51000)


def test_unknown_mode_is_said_and_measured(tmp_path, mode_env):
    mode_env("fastest")
    tree = DiskTree(tmp_path)
    s, built = open_sampler(tree, disk=True)
    check_error(s, "disk")
    assert "SYSPROF_DISK_FILES='fastest'" in s.errors["disk"]
    tree.write(V2)
    row, now = take(s)
    check_disk(row, "sda", WANT_V2["sda"], built, now)
