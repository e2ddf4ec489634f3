"""Exact-value tests of the native Sampler against hand-written /proc and /sys trees: memory and swap (/proc/meminfo),
disks (/proc/diskstats, /sys/block) and network interfaces (/proc/net/dev).

The method and the helpers are those of tests/test_sampler_fixtures.py (see its docstring).
"""

from test_sampler_fixtures import (
    DISK_SUFFIXES,
    MEM_CHANNELS,
    NET_SUFFIXES,
    Tree,
    check_error,
    check_rate,
    devices,
    exact,
    nan,
    open_sampler,
    take,
)


# --------------------------------------------------------------------------------------------------
# memory + swap: /proc/meminfo
# --------------------------------------------------------------------------------------------------
def test_meminfo_modern(tmp_path):
    tree = Tree("meminfo_modern", tmp_path)
    s, _ = open_sampler(tree, memory=True)
    assert s.channels == MEM_CHANNELS
    assert "memory" not in s.errors and "swap" not in s.errors  # HugePages_* lines without kB are valid
    row, _ = take(s)
    want = {
        "memory/total_bytes": 16307652 * 1024,
        "memory/available_bytes": 8000000 * 1024,  # MemAvailable
        "memory/used_bytes": (16307652 - 8000000) * 1024,
        "memory/free_bytes": 1234567 * 1024,
        "memory/buffers_bytes": 4096 * 1024,  # "Buffers:4096 kB", no blank after ':'
        "memory/cached_bytes": 5000000 * 1024,  # Cached, not SwapCached (77777)
        "memory/dirty_bytes": 1234 * 1024,
        "memory/writeback_bytes": 8 * 1024,  # Writeback, not WritebackTmp (0)
        "memory/used_percent": 100 * 8307652 / 16307652,
        "swap/total_bytes": 2097148 * 1024,
        "swap/used_bytes": (2097148 - 1048576) * 1024,
        "swap/free_bytes": 1048576 * 1024,
    }
    for n, w in want.items():
        exact(n, row[n], w)


def test_meminfo_without_memavailable(tmp_path):
    # pre-3.14 kernel: available = MemFree + Buffers + Cached = 512000 + 64000 + 256000 = 832000 kB
    tree = Tree("meminfo_old", tmp_path)
    s, _ = open_sampler(tree, memory=True)
    assert s.channels == MEM_CHANNELS
    assert "memory" not in s.errors
    row, _ = take(s)
    want = {
        "memory/total_bytes": 2048000 * 1024,
        "memory/available_bytes": 832000 * 1024,
        "memory/used_bytes": (2048000 - 832000) * 1024,
        "memory/free_bytes": 512000 * 1024,
        "memory/buffers_bytes": 64000 * 1024,
        "memory/cached_bytes": 256000 * 1024,
        "memory/dirty_bytes": 40 * 1024,
        "memory/writeback_bytes": 0,
        "memory/used_percent": 100 * 1216000 / 2048000,  # = 59.375
        "swap/total_bytes": 0,  # "SwapTotal:0 kB"
        "swap/used_bytes": 0,
        "swap/free_bytes": 0,
    }
    for n, w in want.items():
        exact(n, row[n], w)


def test_meminfo_floors_and_huge_values(tmp_path):
    tree = Tree("meminfo_odd", tmp_path)
    s, _ = open_sampler(tree, memory=True)
    row, _ = take(s)
    exact("memory/total_bytes", row["memory/total_bytes"], 1000000 * 1024)
    # MemAvailable 1200000 kB > MemTotal: available is at most the total, so used is 0, never negative
    exact("memory/available_bytes", row["memory/available_bytes"], 1000000 * 1024)
    exact("memory/used_bytes", row["memory/used_bytes"], 0)
    exact("memory/used_percent", row["memory/used_percent"], 0.0)
    # SwapFree 300 > SwapTotal 100: free is at most the total (100 kB), used 100 - 100 = 0
    exact("swap/used_bytes", row["swap/used_bytes"], 0)
    exact("swap/free_bytes", row["swap/free_bytes"], 100 * 1024)
    # Dirty = 18014398509481985 kB = (2^54 + 1) kB = 2^64 + 1024 bytes: a uint64 multiply wraps to 1024.
    # Must come out as about 1.8447e19 (or inf), never small. NaN fails the comparison too.
    assert row["memory/dirty_bytes"] >= 1.8e19, row["memory/dirty_bytes"]
    # Writeback = 99999999999999999999999 kB does not even fit a uint64 as a kB count: ~1.024e26 or inf.
    assert row["memory/writeback_bytes"] >= 1e26, row["memory/writeback_bytes"]


def test_meminfo_malformed_lines_skipped(tmp_path):
    # "this line has no colon at all" and "Active(anon):   notanumber kB" are skipped and reported
    tree = Tree("meminfo_badlines", tmp_path)
    s, _ = open_sampler(tree, memory=True)
    assert s.channels == MEM_CHANNELS
    row, _ = take(s)
    check_error(s, "memory")
    want = {
        "memory/total_bytes": 4000000 * 1024,
        "memory/available_bytes": 3000000 * 1024,
        "memory/used_bytes": 1000000 * 1024,
        "memory/free_bytes": 1000000 * 1024,
        "memory/buffers_bytes": 100000 * 1024,
        "memory/cached_bytes": 1500000 * 1024,
        "memory/dirty_bytes": 100 * 1024,
        "memory/used_percent": 25.0,  # 100 * 1000000 / 4000000
        "swap/total_bytes": 1000000 * 1024,
        "swap/used_bytes": 750000 * 1024,
        "swap/free_bytes": 250000 * 1024,
    }
    for n, w in want.items():
        exact(n, row[n], w)


# --------------------------------------------------------------------------------------------------
# disk: /proc/diskstats + /sys/block
# --------------------------------------------------------------------------------------------------
# v2 totals and v1->v2 deltas; rb/wb = sectors * 512, times = ms / 1000
DISK_V2 = {
    # 14 fields (2.6+): sectors_read 9550688->9551688, written 5922052->5923052, io ms 3376340->3376440
    "hda": dict(read_bytes=9551688 * 512, write_bytes=5923052 * 512, read_count=446316, write_count=424947,
                busy=3376440 / 1000, read_time=4382410 / 1000, write_time=19310480 / 1000,
                d_rb=1000 * 512, d_wb=1000 * 512, d_rc=100, d_wc=100, d_busy=100 / 1000),
    # 14 fields: sectors 20000->20800, 40000->41000; reads 1000->1100, writes 2000->2050; io 1800->2000
    "sda": dict(read_bytes=20800 * 512, write_bytes=41000 * 512, read_count=1100, write_count=2050,
                busy=2000 / 1000, read_time=600 / 1000, write_time=1700 / 1000,
                d_rb=800 * 512, d_wb=1000 * 512, d_rc=100, d_wc=50, d_busy=200 / 1000),
    # 14 fields, '/' in the name (sysfs: cciss!c0d0): sectors 6000->6200, 8000->8400; io 200->230
    "cciss/c0d0": dict(read_bytes=6200 * 512, write_bytes=8400 * 512, read_count=310, write_count=420,
                       busy=230 / 1000, read_time=100 / 1000, write_time=140 / 1000,
                       d_rb=200 * 512, d_wb=400 * 512, d_rc=10, d_wc=20, d_busy=30 / 1000),
    # 18 fields (4.18+ discard stats): sectors 4000000->4100000, 8000000->8200000; io 40000->40700
    "nvme0n1": dict(read_bytes=4100000 * 512, write_bytes=8200000 * 512, read_count=51000, write_count=60500,
                    busy=40700 / 1000, read_time=20500 / 1000, write_time=30600 / 1000,
                    d_rb=100000 * 512, d_wb=200000 * 512, d_rc=1000, d_wc=500, d_busy=700 / 1000),
    # 20 fields (5.5+ flush stats): sectors 140000->140700, 160000->160800; io 6000->6050
    "vda": dict(read_bytes=140700 * 512, write_bytes=160800 * 512, read_count=7070, write_count=8080,
                busy=6050 / 1000, read_time=3600 / 1000, write_time=4100 / 1000,
                d_rb=700 * 512, d_wb=800 * 512, d_rc=70, d_wc=80, d_busy=50 / 1000),
    # 20 fields, unchanged: 24 sectors read, 12 reads, io 4 ms, read 1 ms
    "loop0": dict(read_bytes=24 * 512, write_bytes=0, read_count=12, write_count=0,
                  busy=4 / 1000, read_time=1 / 1000, write_time=0.0,
                  d_rb=0, d_wb=0, d_rc=0, d_wc=0, d_busy=0),
    # 20 fields, unchanged; a whole disk whose name ends in digits (sysfs says so, not the name)
    "md127": dict(read_bytes=4000 * 512, write_bytes=4800 * 512, read_count=500, write_count=600,
                  busy=0.0, read_time=0.0, write_time=0.0,
                  d_rb=0, d_wb=0, d_rc=0, d_wc=0, d_busy=0),
}


def check_disk(row, dev, want, prev, now):
    p = f"disk/{dev}/"
    exact(p + "read_bytes", row[p + "read_bytes"], want["read_bytes"])
    exact(p + "write_bytes", row[p + "write_bytes"], want["write_bytes"])
    exact(p + "read_count", row[p + "read_count"], want["read_count"])
    exact(p + "write_count", row[p + "write_count"], want["write_count"])
    exact(p + "busy_time_seconds", row[p + "busy_time_seconds"], want["busy"])
    exact(p + "read_time_seconds", row[p + "read_time_seconds"], want["read_time"])
    exact(p + "write_time_seconds", row[p + "write_time_seconds"], want["write_time"])
    check_rate(p + "read_bytes_per_second", row[p + "read_bytes_per_second"], want["d_rb"], prev, now)
    check_rate(p + "write_bytes_per_second", row[p + "write_bytes_per_second"], want["d_wb"], prev, now)
    check_rate(p + "read_count_per_second", row[p + "read_count_per_second"], want["d_rc"], prev, now)
    check_rate(p + "write_count_per_second", row[p + "write_count_per_second"], want["d_wc"], prev, now)
    check_rate(p + "busy_time_seconds_per_second", row[p + "busy_time_seconds_per_second"], want["d_busy"],
               prev, now, cap=1.0)


def test_disk_formats_and_whole_disks(tmp_path):
    tree = Tree("disk_formats", tmp_path)
    s, built = open_sampler(tree, disk=True)
    assert "disk" not in s.errors
    # partitions hda1 (7-field), sda1, cciss/c0d0p1, vda1, nvme0n1p1 and "foo" (no /sys/block entry) are out
    assert devices(s.channels, "disk/") == set(DISK_V2)
    assert [c for c in s.channels if c.startswith("disk/sda/")] == [f"disk/sda/{x}" for x in DISK_SUFFIXES]
    assert [c for c in s.channels if c.startswith("disk/cciss/c0d0/")] == [
        f"disk/cciss/c0d0/{x}" for x in DISK_SUFFIXES]
    tree.apply("v2")
    row, now = take(s)
    for dev, want in DISK_V2.items():
        check_disk(row, dev, want, built, now)


def test_disk_old_partition_lines_without_sys_block(tmp_path):
    # no <sys_root>/block at all: every device is kept (hda and the 7-field hda1), errors["disk"] says so
    tree = Tree("disk_nosysblock", tmp_path)
    s, built = open_sampler(tree, disk=True)
    check_error(s, "disk")
    assert devices(s.channels, "disk/") == {"hda", "hda1"}
    assert [c for c in s.channels if c.startswith("disk/hda1/")] == [f"disk/hda1/{x}" for x in DISK_SUFFIXES]
    tree.apply("v2")
    row, now = take(s)
    check_disk(row, "hda", DISK_V2["hda"], built, now)  # same hda lines as disk_formats
    # hda1 "35586 38530 38130 39030" = reads, sectors read, writes, sectors written; v1 35486 38030 38030 38030
    p = "disk/hda1/"
    exact(p + "read_count", row[p + "read_count"], 35586)
    exact(p + "read_bytes", row[p + "read_bytes"], 38530 * 512)
    exact(p + "write_count", row[p + "write_count"], 38130)
    exact(p + "write_bytes", row[p + "write_bytes"], 39030 * 512)
    for x in ("busy_time_seconds", "read_time_seconds", "write_time_seconds", "busy_time_seconds_per_second"):
        nan(p + x, row[p + x])  # not on 7-field lines: unknown, not 0
    check_rate(p + "read_bytes_per_second", row[p + "read_bytes_per_second"], 500 * 512, built, now)
    check_rate(p + "write_bytes_per_second", row[p + "write_bytes_per_second"], 1000 * 512, built, now)
    check_rate(p + "read_count_per_second", row[p + "read_count_per_second"], 100, built, now)
    check_rate(p + "write_count_per_second", row[p + "write_count_per_second"], 100, built, now)


def test_disk_counter_wrap(tmp_path):
    tree = Tree("disk_wrap", tmp_path)
    s, built = open_sampler(tree, disk=True)
    assert devices(s.channels, "disk/") == {"sda", "sdb"}  # sda1 lives under sda in sysfs
    p = "disk/sdb/"
    tree.apply("v2")
    row, t2 = take(s)
    # reads 4294967000 -> 200: before < 2^32, after < before: wrapped, delta 200 + 2^32 - 4294967000 = 496
    exact(p + "read_count", row[p + "read_count"], 4294967496)  # 200 + 2^32, unwrapped total
    check_rate(p + "read_count_per_second", row[p + "read_count_per_second"], 496, built, t2)
    # sectors read 4294967290 -> 10: delta 10 + 2^32 - 4294967290 = 16 sectors = 8192 bytes
    exact(p + "read_bytes", row[p + "read_bytes"], 2199023260672)  # (10 + 2^32) * 512
    check_rate(p + "read_bytes_per_second", row[p + "read_bytes_per_second"], 16 * 512, built, t2)
    # io ms 4294967295 -> 999: delta 999 + 2^32 - 4294967295 = 1000 ms
    exact(p + "busy_time_seconds", row[p + "busy_time_seconds"], 4294968295 / 1000)  # (999 + 2^32) ms
    check_rate(p + "busy_time_seconds_per_second", row[p + "busy_time_seconds_per_second"], 1.0, built, t2, cap=1.0)
    # writes 5000000000 -> 4999999000 and sectors 6000000000 -> 5999999999: before >= 2^32, a decrease
    # that is not a 32-bit wrap -> delta 0
    check_rate(p + "write_count_per_second", row[p + "write_count_per_second"], 0, built, t2)
    check_rate(p + "write_bytes_per_second", row[p + "write_bytes_per_second"], 0, built, t2)
    exact(p + "read_time_seconds", row[p + "read_time_seconds"], 100 / 1000)
    # untouched sda: rates exactly 0
    check_rate("disk/sda/read_bytes_per_second", row["disk/sda/read_bytes_per_second"], 0, built, t2)
    # v3: reads 200 -> 300 (+100), sectors 10 -> 20 (+10), io 999 -> 1999 (+1000 ms): totals stay unwrapped
    tree.apply("v3")
    row, t3 = take(s)
    exact(p + "read_count", row[p + "read_count"], 4294967596)  # 300 + 2^32
    check_rate(p + "read_count_per_second", row[p + "read_count_per_second"], 100, t2, t3)
    exact(p + "read_bytes", row[p + "read_bytes"], 2199023265792)  # (20 + 2^32) * 512
    check_rate(p + "read_bytes_per_second", row[p + "read_bytes_per_second"], 10 * 512, t2, t3)
    exact(p + "busy_time_seconds", row[p + "busy_time_seconds"], 4294969295 / 1000)  # (1999 + 2^32) ms
    check_rate(p + "busy_time_seconds_per_second", row[p + "busy_time_seconds_per_second"], 1.0, t2, t3, cap=1.0)
    check_rate(p + "write_count_per_second", row[p + "write_count_per_second"], 0, t2, t3)


def test_disk_malformed_lines_skipped(tmp_path):
    # sdb has non-numeric statistics, sdc only 3, "garbage" has no fields at all; sda and sdd are fine
    tree = Tree("disk_badlines", tmp_path)
    s, _ = open_sampler(tree, disk=True)
    check_error(s, "disk")
    assert devices(s.channels, "disk/") == {"sda", "sdd"}
    row, _ = take(s)
    exact("disk/sda/read_bytes", row["disk/sda/read_bytes"], 20000 * 512)
    exact("disk/sda/write_count", row["disk/sda/write_count"], 2000)
    exact("disk/sdd/read_count", row["disk/sdd/read_count"], 100)
    exact("disk/sdd/read_bytes", row["disk/sdd/read_bytes"], 800 * 512)
    exact("disk/sdd/write_bytes", row["disk/sdd/write_bytes"], 1600 * 512)
    exact("disk/sdd/read_bytes_per_second", row["disk/sdd/read_bytes_per_second"], 0.0)


# --------------------------------------------------------------------------------------------------
# net: /proc/net/dev
# --------------------------------------------------------------------------------------------------
# totals after v2 and v1->v2 deltas (rb = rx bytes, sb = tx bytes, rp/sp = packets)
NET_V2 = {
    # modern format "%6s: %7llu": everything +10000 bytes / +100 packets
    "lo": dict(bytes_recv=133456, bytes_sent=133456, packets_recv=889, packets_sent=889,
               errors_in=0, errors_out=0, drops_in=0, drops_out=0, d_rb=10000, d_sb=10000, d_rp=100, d_sp=100),
    # rx bytes 4294967200 -> 100 wrapped at 32 bits: delta 100 + 2^32 - 4294967200 = 196, total 100 + 2^32;
    # tx bytes 5000000000 -> 4999999999: before >= 2^32 -> delta 0 (total not pinned by the contract)
    "eth0": dict(bytes_recv=4294967396, bytes_sent=None, packets_recv=1010, packets_sent=2020,
                 errors_in=2, errors_out=3, drops_in=3, drops_out=5, d_rb=196, d_sb=0, d_rp=10, d_sp=20),
    # old format "%6s:%8lu" (no blank after ':'); fifo/frame/compressed/multicast/colls/carrier set to
    # 7..14 so that a column mix-up shows
    "eth1": dict(bytes_recv=123466789, bytes_sent=987659321, packets_recv=54421, packets_sent=12395,
                 errors_in=1, errors_out=3, drops_in=2, drops_out=4, d_rb=10000, d_sb=5000, d_rp=100, d_sp=50),
    # name containing ':' and glued to a 13-digit number: "vnet:0:1234567900123"
    "vnet:0": dict(bytes_recv=1234567900123, bytes_sent=99765, packets_recv=4667, packets_sent=53,
                   errors_in=0, errors_out=0, drops_in=0, drops_out=0, d_rb=10000, d_sb=1000, d_rp=100, d_sp=10),
    # 15-character name, longer than the 6-wide column, glued to its number
    "br-3f2a9c1d7e6b": dict(bytes_recv=12345688901, bytes_sent=300, packets_recv=20, packets_sent=3,
                            errors_in=0, errors_out=0, drops_in=0, drops_out=0,
                            d_rb=10000, d_sb=200, d_rp=10, d_sp=2),
}


def check_nic(row, nic, want, prev, now):
    p = f"net/{nic}/"
    for k in ("bytes_recv", "bytes_sent", "packets_recv", "packets_sent",
              "errors_in", "errors_out", "drops_in", "drops_out"):
        if want[k] is not None:
            exact(p + k, row[p + k], want[k])
    check_rate(p + "bytes_recv_per_second", row[p + "bytes_recv_per_second"], want["d_rb"], prev, now)
    check_rate(p + "bytes_sent_per_second", row[p + "bytes_sent_per_second"], want["d_sb"], prev, now)
    check_rate(p + "packets_recv_per_second", row[p + "packets_recv_per_second"], want["d_rp"], prev, now)
    check_rate(p + "packets_sent_per_second", row[p + "packets_sent_per_second"], want["d_sp"], prev, now)


def test_net_formats_and_wrap(tmp_path):
    tree = Tree("net_formats", tmp_path)
    s, built = open_sampler(tree, net=True)
    assert "net" not in s.errors
    assert devices(s.channels, "net/") == set(NET_V2)
    assert [c for c in s.channels if c.startswith("net/vnet:0/")] == [f"net/vnet:0/{x}" for x in NET_SUFFIXES]
    tree.apply("v2")
    row, t2 = take(s)
    for nic, want in NET_V2.items():
        check_nic(row, nic, want, built, t2)
    # v3: eth0 rx 100 -> 1100 (+1000): total stays unwrapped, 1100 + 2^32; packets 1010 -> 1020, 2020 -> 2030;
    # eth1 unchanged; vnet:0 vanished -> NaN
    tree.apply("v3")
    row, t3 = take(s)
    exact("net/eth0/bytes_recv", row["net/eth0/bytes_recv"], 4294968396)
    check_rate("net/eth0/bytes_recv_per_second", row["net/eth0/bytes_recv_per_second"], 1000, t2, t3)
    check_rate("net/eth0/packets_recv_per_second", row["net/eth0/packets_recv_per_second"], 10, t2, t3)
    check_rate("net/eth0/packets_sent_per_second", row["net/eth0/packets_sent_per_second"], 10, t2, t3)
    check_rate("net/eth0/bytes_sent_per_second", row["net/eth0/bytes_sent_per_second"], 0, t2, t3)
    check_rate("net/lo/bytes_recv_per_second", row["net/lo/bytes_recv_per_second"], 10000, t2, t3)
    check_rate("net/eth1/bytes_recv_per_second", row["net/eth1/bytes_recv_per_second"], 0, t2, t3)
    exact("net/eth1/bytes_recv", row["net/eth1/bytes_recv"], 123466789)
    for x in NET_SUFFIXES:
        nan("net/vnet:0/" + x, row["net/vnet:0/" + x])


def test_net_malformed_lines_skipped(tmp_path):
    # "this line has no colon", "eth9: 1 2 3" (3 of 16 numbers) and eth8 ("x") are skipped and reported
    tree = Tree("net_badlines", tmp_path)
    s, _ = open_sampler(tree, net=True)
    check_error(s, "net")
    assert devices(s.channels, "net/") == {"lo", "eth0"}
    row, _ = take(s)
    exact("net/lo/bytes_recv", row["net/lo/bytes_recv"], 123456)
    exact("net/lo/packets_sent", row["net/lo/packets_sent"], 789)
    exact("net/eth0/bytes_recv", row["net/eth0/bytes_recv"], 5000)
    exact("net/eth0/packets_recv", row["net/eth0/packets_recv"], 60)
    exact("net/eth0/bytes_sent", row["net/eth0/bytes_sent"], 7000)
    exact("net/eth0/packets_sent", row["net/eth0/packets_sent"], 80)


def test_disk_unchanged_lines_gone_and_back(tmp_path):
    # An idle device prints the same bytes each read (sysprof then skips its parse: file_source.hpp); the values
    # must be those of a parse: totals unchanged, rates exactly 0; a device that leaves reads NaN, and one that
    # returns with the very line it had is re-primed (no rate on its first line back), then counts on.
    tree = Tree("disk_wrap", tmp_path)
    s, built = open_sampler(tree, disk=True)
    sda = "   8       0 sda 10 0 80 1 10 0 80 1 0 2 2\n"
    sdb = "   8      16 sdb 4294967000 0 4294967290 100 5000000000 0 6000000000 200 0 4294967295 0\n"
    sdb2 = "   8      16 sdb 4294967100 0 4294967290 100 5000000000 0 6000000000 200 0 4294967295 0\n"
    row, t1 = take(s)  # the file as at construction: every line unchanged
    exact("disk/sdb/read_count", row["disk/sdb/read_count"], 4294967000)
    exact("disk/sda/read_bytes", row["disk/sda/read_bytes"], 80 * 512)
    for dev in ("sda", "sdb"):
        for x in ("read_bytes_per_second", "write_bytes_per_second", "read_count_per_second",
                  "write_count_per_second", "busy_time_seconds_per_second"):
            check_rate(f"disk/{dev}/{x}", row[f"disk/{dev}/{x}"], 0, built, t1)
    tree.write("diskstats", sda)  # sdb leaves
    row, t2 = take(s)
    for x in DISK_SUFFIXES:
        nan(f"disk/sdb/{x}", row[f"disk/sdb/{x}"])
    exact("disk/sda/read_count", row["disk/sda/read_count"], 10)
    tree.write("diskstats", sda + sdb)  # sdb returns with the line it had
    row, t3 = take(s)
    exact("disk/sdb/read_count", row["disk/sdb/read_count"], 4294967000)
    exact("disk/sdb/busy_time_seconds", row["disk/sdb/busy_time_seconds"], 4294967295 / 1000)
    nan("disk/sdb/read_count_per_second", row["disk/sdb/read_count_per_second"])  # re-primed: no rate yet
    check_rate("disk/sda/read_count_per_second", row["disk/sda/read_count_per_second"], 0, t2, t3)
    tree.write("diskstats", sda + sdb2)  # reads +100
    row, t4 = take(s)
    exact("disk/sdb/read_count", row["disk/sdb/read_count"], 4294967100)
    check_rate("disk/sdb/read_count_per_second", row["disk/sdb/read_count_per_second"], 100, t3, t4)
    tree.write("diskstats", sda + sdb2)  # unchanged again
    row, t5 = take(s)
    exact("disk/sdb/read_count", row["disk/sdb/read_count"], 4294967100)
    check_rate("disk/sdb/read_count_per_second", row["disk/sdb/read_count_per_second"], 0, t4, t5)


def test_disk_idle_device_leaves_its_slice_and_rates_span_the_last_read(tmp_path):
    # A device whose line is the same as at its previous read, and whose previous output was already its idle
    # output (totals, zero rates), writes nothing: sample() keeps its row between calls as the thread does
    # (file_source.hpp, `settled`). Its values must stay exactly those of a parse, read after read, and when it
    # moves again its rate must span the read before (not the last change): delta 100 over one take() window.
    tree = Tree("disk_wrap", tmp_path)
    s, _ = open_sampler(tree, disk=True)
    sda = "   8       0 sda 10 0 80 1 10 0 80 1 0 2 2\n"
    sdb = "   8      16 sdb 4294967000 0 4294967290 100 5000000000 0 6000000000 200 0 4294967295 0\n"
    sda2 = "   8       0 sda 110 0 80 1 10 0 80 1 0 2 2\n"
    tree.write("diskstats", sda + sdb)
    for _ in range(4):  # idle: the first read writes the idle output, the next ones skip the device
        row, t = take(s)
        exact("disk/sda/read_count", row["disk/sda/read_count"], 10)
        exact("disk/sda/read_bytes", row["disk/sda/read_bytes"], 80 * 512)
        exact("disk/sdb/read_count", row["disk/sdb/read_count"], 4294967000)
        exact("disk/sdb/write_bytes", row["disk/sdb/write_bytes"], 6000000000 * 512)
        for dev in ("sda", "sdb"):
            exact(f"disk/{dev}/read_count_per_second", row[f"disk/{dev}/read_count_per_second"], 0.0)
            exact(f"disk/{dev}/busy_time_seconds_per_second", row[f"disk/{dev}/busy_time_seconds_per_second"], 0.0)
    tree.write("diskstats", sda2 + sdb)  # sda reads +100, sdb stays idle (and skipped)
    row, t2 = take(s)
    exact("disk/sda/read_count", row["disk/sda/read_count"], 110)
    check_rate("disk/sda/read_count_per_second", row["disk/sda/read_count_per_second"], 100, t, t2)
    exact("disk/sdb/read_count", row["disk/sdb/read_count"], 4294967000)
    exact("disk/sdb/read_count_per_second", row["disk/sdb/read_count_per_second"], 0.0)
    for _ in range(2):  # sda idle again: its rate back to exactly 0, then skipped with the right values
        row, t3 = take(s)
        exact("disk/sda/read_count", row["disk/sda/read_count"], 110)
        exact("disk/sda/read_count_per_second", row["disk/sda/read_count_per_second"], 0.0)
    tree.write("diskstats", sda2)  # sdb leaves: NaN, although its last output was settled
    row, _ = take(s)
    for x in DISK_SUFFIXES:
        nan(f"disk/sdb/{x}", row[f"disk/sdb/{x}"])
    tree.write("diskstats", sda2 + sdb)  # back with the same line: re-primed, not skipped (NaN rate first)
    row, _ = take(s)
    exact("disk/sdb/read_count", row["disk/sdb/read_count"], 4294967000)
    nan("disk/sdb/read_count_per_second", row["disk/sdb/read_count_per_second"])
    row, _ = take(s)
    exact("disk/sdb/read_count_per_second", row["disk/sdb/read_count_per_second"], 0.0)
