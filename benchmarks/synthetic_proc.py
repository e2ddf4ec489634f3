"""Synthetic /proc and /sys trees for the scaling benchmark (``benchmarks/run.py``, section 6).

``make_tree(root, cpus=2, disks=1, nics=1)`` writes ``root/proc`` and ``root/sys`` laid out as the kernel lays
them out (Documentation/filesystems/proc.rst, Documentation/admin-guide/iostats.rst), so that
``sysprof.Sampler(proc_root=..., sys_root=...)`` reads N CPUs, N whole disks (each with ``sys/block/<name>``)
and N network interfaces. The files are static: the benchmark measures reading and parsing, not the kernel's
cost of rendering a /proc file (that part is measured on the live system by the floor program).
"""
from __future__ import annotations

import os
from typing import Tuple

__all__ = ["make_tree"]

_MEMINFO = """\
MemTotal:       1056764124 kB
MemFree:        611245328 kB
MemAvailable:   998201412 kB
Buffers:         1234568 kB
Cached:         380123456 kB
SwapCached:            0 kB
Active:         190123456 kB
Inactive:       220123456 kB
Active(anon):    30123456 kB
Inactive(anon):    123456 kB
Active(file):   160000000 kB
Inactive(file): 220000000 kB
Unevictable:       12345 kB
Mlocked:           12345 kB
SwapTotal:       8388604 kB
SwapFree:        8388604 kB
Zswap:                 0 kB
Zswapped:              0 kB
Dirty:              1234 kB
Writeback:             0 kB
AnonPages:       30123456 kB
Mapped:           1234567 kB
Shmem:             123456 kB
KReclaimable:    12345678 kB
Slab:            23456789 kB
SReclaimable:    12345678 kB
SUnreclaim:      11111111 kB
KernelStack:        98765 kB
PageTables:        234567 kB
SecPageTables:          0 kB
NFS_Unstable:           0 kB
Bounce:                 0 kB
WritebackTmp:           0 kB
CommitLimit:    536770664 kB
Committed_AS:   45678901 kB
VmallocTotal:   34359738367 kB
VmallocUsed:      456789 kB
VmallocChunk:           0 kB
Percpu:           345678 kB
HardwareCorrupted:     0 kB
AnonHugePages:   2048000 kB
ShmemHugePages:        0 kB
ShmemPmdMapped:        0 kB
FileHugePages:         0 kB
FilePmdMapped:         0 kB
Unaccepted:            0 kB
HugePages_Total:       0
HugePages_Free:        0
HugePages_Rsvd:        0
HugePages_Surp:        0
Hugepagesize:       2048 kB
Hugetlb:               0 kB
DirectMap4k:     1234567 kB
DirectMap2M:    98765432 kB
DirectMap1G:    970000000 kB
"""


def _cpu_line(label: str, k: int) -> str:
    base = 1_000_000 + 7919 * k
    fields = [base * 3, base // 100, base, base * 40, base // 50, 0, base // 200, 0, 0, 0]
    return label + " " + " ".join(str(v) for v in fields)


def _stat(cpus: int) -> str:
    lines = [_cpu_line("cpu ", 0)]
    lines += [_cpu_line(f"cpu{i}", i + 1) for i in range(cpus)]
    # The kernel also prints one interrupt counter per IRQ; a large node has hundreds.
    lines.append("intr 123456789 " + " ".join(str((i * 37) % 1000) for i in range(max(64, 4 * cpus))))
    lines += ["ctxt 987654321", "btime 1700000000", "processes 123456", f"procs_running {max(1, cpus // 8)}",
              "procs_blocked 0", "softirq 12345678 1 2 3 4 5 6 7 8 9 10"]
    return "\n".join(lines) + "\n"


def _diskstats(disks: int) -> str:
    out = []
    for i in range(disks):
        name = f"nvme{i}n1"
        # major minor name + 17 statistics (kernel 5.5+: 20 fields in all)
        stats = [1000 + i, 10, 200000 + i, 500, 2000 + i, 20, 400000 + i, 900, 0, 1200, 1400,
                 0, 0, 0, 0, 10, 5]
        out.append(f" 259 {i * 2:7d} {name} " + " ".join(str(v) for v in stats))
    return "\n".join(out) + ("\n" if out else "")


def _netdev(nics: int) -> str:
    out = ["Inter-|   Receive                                                |  Transmit",
           " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo "
           "colls carrier compressed"]
    for i in range(nics):
        name = "lo" if i == 0 else f"eth{i - 1}"
        vals = [123456789 + i, 123456 + i, 0, 1, 0, 0, 0, 10, 987654321 + i, 654321 + i, 0, 2, 0, 0, 0, 0]
        out.append(f"{name:>6}: " + " ".join(f"{v:>8}" for v in vals))
    return "\n".join(out) + "\n"


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def make_tree(root: str, cpus: int = 2, disks: int = 1, nics: int = 1) -> Tuple[str, str]:
    """Writes a synthetic tree under ``root``; returns ``(proc_root, sys_root)``."""
    proc, sys_ = os.path.join(root, "proc"), os.path.join(root, "sys")
    _write(os.path.join(proc, "stat"), _stat(cpus))
    _write(os.path.join(proc, "meminfo"), _MEMINFO)
    _write(os.path.join(proc, "diskstats"), _diskstats(disks))
    _write(os.path.join(proc, "net", "dev"), _netdev(nics))
    _write(os.path.join(proc, "loadavg"), "1.25 0.98 0.75 3/1234 56789\n")
    _write(os.path.join(sys_, "devices", "system", "cpu", "possible"), f"0-{max(0, cpus - 1)}\n")
    os.makedirs(os.path.join(sys_, "block"), exist_ok=True)
    for i in range(disks):
        os.makedirs(os.path.join(sys_, "block", f"nvme{i}n1"), exist_ok=True)
    return proc, sys_
