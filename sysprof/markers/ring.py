"""The markers' wire format: one shared-memory ring file per marking process, in a directory the recorder names
in the environment (``SYSPROF_MARKERS``). This module is the format's one statement: the layout, the producer
(:class:`Ring`, used by :mod:`sysprof.markers` on the caller's thread) and the consumer (:class:`RingReader`, used
by the recorder's :class:`sysprof.markers.receiver.MarkerReceiver`).

Why a ring and not a socket (measured in ``benchmarks/bench_mark.py`` on a shared 2-core machine): a
non-blocking Unix ``SOCK_SEQPACKET`` send of the same record costs a system call per marker, about 2.3-2.9 us
of thread CPU (tens of us at p99 in wall time), over the 2 us budget, and a Unix datagram socket also drops
past ``net.unix.max_dgram_qlen`` (10 by default) queued messages. A record written into a mapped tmpfs file is
a few stores, no system call, no page fault (the file is written through once when created): about 0.3-0.6 us
per marker with the native writer, 1-2 us with the pure-Python one, on the same machine; the recorder reads it
at its own pace.

File layout (native byte order and alignment: producer and consumer are on the same machine)::

    0    magic  8 bytes  b"SYSPMRK\\x01" (written last at creation: a reader skips a file without it)
    8    slot_size u32, nslots u32 (a power of two)
    16   pid i64 (the producer), 24 created_ns i64, 32 comm 16 bytes (the producer's /proc/self/comm at creation)
    64   dropped i64     markers the producer dropped (ring full): written by the producer
    72   claim i64       the native writer's claim cursor (the Python writer keeps its count in Python)
    128  tail i64        records consumed: written by the consumer
    256  slots: nslots x slot_size bytes

    slot: 0 seq i64 (the record's index + 1, stored last: the record is complete once seq is there)
          8 ts_ns i64 (CLOCK_REALTIME, ns since the epoch: the clock of the sampler's timestamps)
          16 word u64: tid (bits 0-31), kind (32-39: 1 begin, 2 end, 3 instant), flags (40-47: 1 name
             truncated, 2 args dropped), name_len (48-55), args_len (56-63)
          24 name (UTF-8) then args (JSON, UTF-8)

Space is reserved before the first store (``posix_fallocate``), so no store into a mapping can fault: on a full
file system (a container's small ``/dev/shm``) a store into a sparse tmpfs page raises SIGBUS in the marking
program. Where the full ring does not fit, the producer makes a *stub*: the header alone (``nslots`` 0, one
page), whose ``dropped`` counts every marker of the process, so the recorder still reports them; where not even
that fits, an empty ``<pid>-<created>.nospace`` file says the process's markers were lost (count unknown).

The recorder reads a ring with ``pread`` and writes its tail with ``pwrite``, never through a mapping: a ring
truncated or replaced under it (by the program, or any process of the same user) cannot raise a signal in the
recorder; the reader checks the size at each read and treats a changed one as that process's markers lost.
A run of slots is read twice: the first read's ``seq`` words say which records are published, the second read
(later in time) gives their bodies and confirms each ``seq`` again, so a record is never taken before it was
complete, whatever order the kernel copies a read's bytes in.

One process writes a ring, one recorder reads it. The process's threads claim a slot with ``next()`` of an
``itertools.count`` (one C call: atomic under the GIL, so no lock, and a signal handler marking in the middle of
its own thread's marker just claims the next slot), write the body (one ``pack_into``), then store ``seq``; the
stores are ordered on x86-64 (TSO), the platform the recorder is built for. A slot claimed but not yet stored
stops the reader there until the next drain. The producer does not claim a slot while the ring holds
``CAPACITY`` (``NSLOTS - MARGIN``) unread records: it drops the new one and counts it (the margin covers
threads racing past the check; it reads the reader's tail only when its cached limit is reached).
"""
from __future__ import annotations

import fcntl
import functools
import itertools
import mmap
import os
import stat
import struct
import threading
import time

from ..text import text

MAGIC = b"SYSPMRK\x01"
ENV = "SYSPROF_MARKERS"
#: "0": write with the pure-Python writer even where the extension is built (tests, benchmarks)
NATIVE_ENV = "SYSPROF_MARKERS_NATIVE"
SLOT_SHIFT = 8
SLOT_SIZE = 1 << SLOT_SHIFT
NSLOTS = 4096  # 1 MiB per process
MASK = NSLOTS - 1
HEADER = 256
COMM_AT = 32
DROPPED_AT = 64
TAIL_AT = 128
PAYLOAD_AT = 24
MARGIN = 64
#: unread records a ring holds before the producer drops (the recorder drains every 0.2 s: ~20,000 markers/s)
CAPACITY = NSLOTS - MARGIN
PAYLOAD_MAX = SLOT_SIZE - PAYLOAD_AT  # name + args bytes of one record
#: a marker's name is cut to at most this many UTF-8 bytes (at a character boundary)
NAME_MAX_BYTES = 200

BEGIN, END, INSTANT = 1, 2, 3
NAME_TRUNCATED, ARGS_DROPPED = 1, 2

_I64 = struct.Struct("@q")
_BODY = struct.Struct("@qQ")  # at slot + 8: ts_ns, word
_INFO = struct.Struct("@IIqq")  # at 8: slot_size, nslots, pid, created_ns
_pack_i64, _unpack_i64 = _I64.pack_into, _I64.unpack_from
_time_ns = time.time_ns
assert _BODY.size == PAYLOAD_AT - 8 and NSLOTS & (NSLOTS - 1) == 0 and PAYLOAD_MAX < 256


def encode_name(name) -> tuple:
    """``(utf8_bytes, flags)`` for a marker name: any object (a non-str is ``str()``-ed, bytes decoded as UTF-8
    with replacement), lone surrogates escaped as ``\\udcxx``, cut to NAME_MAX_BYTES at a character boundary."""
    if not isinstance(name, str):
        name = text(name) if isinstance(name, (bytes, bytearray)) else str(name)
    raw = name.encode("utf-8", "backslashreplace")
    if len(raw) <= NAME_MAX_BYTES:
        return raw, 0
    return raw[:NAME_MAX_BYTES].decode("utf-8", "ignore").encode("utf-8"), NAME_TRUNCATED


def word(kind: int, flags: int, name_len: int, args_len: int = 0) -> int:
    """A record's word without its tid (the caller ORs the tid in)."""
    return kind << 32 | flags << 40 | name_len << 48 | args_len << 56


@functools.lru_cache(maxsize=None)  # at most PAYLOAD_MAX + 1 lengths
def packer(payload_len: int):
    """``pack(buf, offset, ts_ns, word, payload)`` for a record body with a payload of ``payload_len`` bytes."""
    return struct.Struct(f"@qQ{payload_len}s").pack_into


def ring_size(nslots: int = NSLOTS) -> int:
    """The file size of a ring of ``nslots`` slots; a stub (``nslots`` 0) is one page, the header alone."""
    return HEADER + nslots * SLOT_SIZE if nslots else STUB_SIZE


#: the largest count (dropped, skipped) believed from a ring's header or sequence numbers: a producer marking 1 M
#: times a second for a year stays below it; a larger one is a damaged ring
MAX_COUNT = 1 << 45
#: the size of a stub ring (the header alone, on one page): every marker of its process dropped and counted
STUB_SIZE = 4096
#: suffix of the empty file a producer leaves where not even a stub ring fits
NOSPACE = ".nospace"


def native(name: str, writer: bool = True):
    """``sysprof._native.<name>`` (the markers' C++ side) where the extension is built, else None; for a
    ``writer`` part also None where SYSPROF_MARKERS_NATIVE is "0"."""
    if writer and os.environ.get(NATIVE_ENV, "1") == "0":
        return None
    try:
        from .. import _native
    except ImportError:
        return None
    return getattr(_native, name, None)


def _native_writer():
    return native("marker_writer")


#: the extension's atomic drop count (whichever writer writes the records), None without the extension
_atomic_drop = native("marker_drop", writer=False)


class Ring:
    """The producer side of one process's ring file (created with O_EXCL in ``directory``, written through
    once so no later store faults). Raises OSError when the file cannot be made (the caller then drops).

    ``put`` is the extension's writer (``csrc/markers/``, the same format) where it is built, else the Python
    one below; ``native=False`` picks the Python one."""

    def __init__(self, directory: str, pid: int, native: bool = True):
        created = time.time_ns()
        path = os.path.join(directory, f"{pid}-{created}.ring")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            nslots = _reserve(fd)
            size = ring_size(nslots)
            self.mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError:  # not even a stub fits: an empty file names the loss for the recorder
            os.close(fd)
            try:
                os.rename(path, path[:-len(".ring")] + NOSPACE)
            except OSError:
                _unlink(path)
            raise
        except BaseException:
            os.close(fd)
            _unlink(path)
            raise
        _hold(fd)
        os.close(fd)  # the mapping keeps the open file, and with it the lock, while this process maps it
        mm = self.mm
        mm[HEADER:] = bytes(size - HEADER)  # touch every page now (reserved), not on the caller's first markers
        _INFO.pack_into(mm, 8, SLOT_SIZE, nslots, pid, created)
        mm[COMM_AT:COMM_AT + 16] = _own_comm().ljust(16, b"\0")
        mm[0:8] = MAGIC
        self.buf = memoryview(mm)  # slicing and struct calls on a memoryview cost less than on the mmap
        self.path = path
        self.nslots = nslots
        self.head = 0  # a hint: one past the latest slot claimed
        self.limit = CAPACITY  # head may reach this before the consumer's tail is read again
        self._claim = itertools.count().__next__
        self.tls = threading.local()  # the calling thread's tid, looked up once per thread
        make = _native_writer() if native and nslots else None
        self.native = make is not None
        if make is not None:
            self.put = make(mm)  # shadows the method below: put(word, pack, payload) in C++
        elif not nslots:
            self.put = self._drop_put  # a stub: every marker dropped and counted

    def _drop_put(self, word, pack, payload) -> bool:
        self.drop()
        return False

    def put(self, word: int, pack, payload: bytes) -> bool:
        """Write one record: ``word`` as :func:`word` gives, ``payload`` the name and args bytes (at most
        PAYLOAD_MAX), ``pack`` its :func:`packer`; stamped now, on the calling thread's tid. False (and counted)
        when the ring is full. Safe from any thread under the GIL; no system call (but a thread's first)."""
        ts = _time_ns()
        try:
            tid = self.tls.tid
        except AttributeError:
            tid = self.tls.tid = threading.get_native_id()
        if self.head >= self.limit:
            self.limit = _unpack_i64(self.buf, TAIL_AT)[0] + CAPACITY
            if self.head >= self.limit:
                self.drop()
                return False
        i = self._claim()
        off = HEADER + ((i & MASK) << SLOT_SHIFT)
        pack(self.buf, off + 8, ts, word | tid, payload)
        _pack_i64(self.buf, off, i + 1)  # published
        self.head = i + 1
        return True

    def drop(self) -> None:
        """Counts one dropped marker: with the extension's atomic add (threads may drop at once), else a
        read-then-write that can lose a count when threads race."""
        if _atomic_drop is not None:
            _atomic_drop(self.mm)
        else:
            _pack_i64(self.buf, DROPPED_AT, _unpack_i64(self.buf, DROPPED_AT)[0] + 1)

    @property
    def dropped(self) -> int:
        return _unpack_i64(self.buf, DROPPED_AT)[0]

    def close(self) -> None:
        self.__dict__.pop("put", None)  # the native writer holds the mapping's buffer
        self.buf.release()
        self.mm.close()


class RingReader:
    """The consumer side of one ring file, read with ``pread`` and acknowledged with ``pwrite`` (module
    docstring): no writer can turn a read into a signal. :meth:`read` returns the records published since the
    last call as ``(ts_ns, tid, kind, flags, name_bytes, args_bytes)`` tuples, in the order they were written.
    Once the file is seen damaged (resized, a short read, an impossible ``seq``), :attr:`damaged` says how and
    nothing more is read from it."""

    #: slots read at once: a first look, then bigger runs while records keep coming
    FIRST_RUN, RUN = 16, 256
    #: runs read at most per call (16,384 slots, four times the ring)
    MAX_RUNS = 64

    def __init__(self, path: str):
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise ValueError(f"{path}: not a regular file")
            head = os.pread(fd, HEADER, 0) if st.st_size >= HEADER else b""
            if len(head) < HEADER or head[0:8] != MAGIC:
                raise ValueError("not a marker ring yet")
            slot_size, nslots, pid, created = _INFO.unpack_from(head, 8)
            if slot_size != SLOT_SIZE or nslots not in (NSLOTS, 0) or st.st_size != ring_size(nslots):
                raise ValueError(f"{path}: unknown marker ring layout")
        except BaseException:
            os.close(fd)
            raise
        self.fd, self.path, self.pid, self.created_ns = fd, path, pid, created
        self.size, self.nslots = st.st_size, nslots
        self.comm = text(head[COMM_AT:COMM_AT + 16].rstrip(b"\0"))
        self.tail = _I64.unpack_from(head, TAIL_AT)[0]
        self.lost = 0  # records the reader skipped
        self._dropped = min(max(_I64.unpack_from(head, DROPPED_AT)[0], 0), MAX_COUNT)  # the producer's, as last read
        self.damaged = None  # why the file stopped being read, once it did
        self.foreign_tids = False  # the producer runs in another pid namespace: its tids are not this one's

    def producer_gone(self) -> bool:
        """Whether no process maps the ring any more: the producer's shared ``flock`` (:func:`_hold`) is gone when
        this reader can take an exclusive one. Where the file system has no flock, whether the header's pid is
        gone (wrong for a producer in another pid namespace)."""
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        except OSError:
            return not _pid_alive(self.pid)
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        return True

    def holder(self):
        """The pid, in this process's pid namespace, of the process holding the ring's lock (/proc/locks), or None.
        In another pid namespace the header's pid is that namespace's, not a pid here."""
        try:
            st = os.fstat(self.fd)
            want = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
            with open("/proc/locks", "rb") as f:
                for line in f.read(1 << 22).split(b"\n"):
                    parts = line.split()
                    if len(parts) >= 6 and parts[1] == b"FLOCK" and parts[5].decode("ascii", "replace") == want:
                        return int(parts[4])
        except (OSError, ValueError):
            pass
        return None

    @property
    def stub(self) -> bool:
        """The producer found no room for a ring: every marker of its process was dropped (and counted)."""
        return self.nslots == 0

    @property
    def dropped(self) -> int:
        if self.damaged is None:
            try:
                got = os.pread(self.fd, 8, DROPPED_AT)
                if len(got) == 8:
                    self._dropped = max(self._dropped, min(_I64.unpack(got)[0], MAX_COUNT))  # never back
            except OSError:
                pass
        return self._dropped + self.lost

    def _damage(self, why: str) -> list:
        if self.damaged is None:
            self.damaged = why
        return []

    def read(self) -> list:
        if self.damaged is not None or self.stub:
            return []
        fd, out = self.fd, []
        try:
            if os.fstat(fd).st_size != self.size:
                return self._damage("its ring file was truncated or resized")
            tail, run = self.tail, self.FIRST_RUN
            for _ in range(self.MAX_RUNS):  # bounded: a writer racing the reader cannot keep it here
                idx = tail & MASK
                k = min(run, NSLOTS - idx)
                off = HEADER + idx * SLOT_SIZE
                first = os.pread(fd, k * SLOT_SIZE, off)
                if len(first) != k * SLOT_SIZE:
                    self._damage("its ring file was truncated")
                    break
                m = 0  # slots published in order from tail, as the first read saw them
                while m < k and _unpack_i64(first, m * SLOT_SIZE)[0] == tail + m + 1:
                    m += 1
                got = self._records(os.pread(fd, m * SLOT_SIZE, off), tail, m, out) if m else 0
                tail += got
                if got < m:  # overwritten between the reads, or a short read: looked at again next time
                    break
                if m == k:
                    run = self.RUN
                    continue
                seq = _unpack_i64(first, m * SLOT_SIZE)[0]  # the first slot not taken: at index tail now
                if seq > tail + 1:
                    if (seq - 1 - tail) % NSLOTS or seq - 1 - tail > MAX_COUNT:
                        self._damage("its ring held an impossible record number")
                        break
                    self.lost += seq - 1 - tail  # overwritten a lap ahead (threads raced past the margin)
                    tail = seq - 1
                    continue
                break  # not published yet
            if tail != self.tail:
                self.tail = tail
                os.pwrite(fd, _I64.pack(tail), TAIL_AT)
        except OSError as e:
            self._damage(f"its ring file could not be read ({e.strerror or e})")
        return out

    @staticmethod
    def _records(buf: bytes, tail: int, m: int, out: list) -> int:
        """Appends the records of the ``m`` slots in ``buf`` (the second read) whose ``seq`` still follows
        ``tail``; returns how many slots it took."""
        if len(buf) != m * SLOT_SIZE:
            return 0
        for j in range(m):
            at = j * SLOT_SIZE
            if _unpack_i64(buf, at)[0] != tail + j + 1:
                return j
            ts, w = _BODY.unpack_from(buf, at + 8)
            n, a, kind = w >> 48 & 0xFF, w >> 56, w >> 32 & 0xFF
            if n + a <= PAYLOAD_MAX and kind in (BEGIN, END, INSTANT):  # else a corrupt record: skipped
                p = at + PAYLOAD_AT
                out.append((ts, w & 0xFFFFFFFF, kind, w >> 40 & 0xFF, buf[p:p + n], buf[p + n:p + n + a]))
        return m

    def close(self, unlink: bool = False) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if unlink:
            _unlink(self.path)


def _hold(fd: int) -> None:
    """A shared ``flock`` on the ring, held as long as the file is open here (the mapping keeps it open): the
    recorder knows the producer is gone when it can lock the file itself (:meth:`RingReader.producer_gone`),
    whatever pid namespace the producer runs in."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:  # a file system without flock: the recorder asks by pid
        pass


def _reserve(fd: int) -> int:
    """Reserves a ring's space in the file ``fd``: the number of slots it got (NSLOTS, or 0: a stub). OSError
    where not even a stub fits."""
    try:
        os.posix_fallocate(fd, 0, ring_size())
        return NSLOTS
    except OSError:
        os.ftruncate(fd, 0)  # give back whatever part was reserved
        os.posix_fallocate(fd, 0, STUB_SIZE)
        return 0


def _pid_alive(pid: int) -> bool:
    if not 0 < pid < 1 << 22:  # not a pid (PID_MAX_LIMIT): a damaged header
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _own_comm() -> bytes:
    try:
        with open("/proc/self/comm", "rb") as f:
            return f.read(16).rstrip(b"\n")[:16]
    except OSError:
        return b""


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
