"""The trace file of ``sysprof record``: created exclusively or opened without truncating, never through a
symbolic link, locked (flock) while recorded, named ``sysprof-YYYYmmdd-HHMMSS[-N].json.gz`` by default (gzipped
Chrome JSON, which Perfetto's UI, chrome://tracing and every sysprof reader open); with ``--max-size`` the numbered
parts of one recording (:class:`_Parts`); the free-space floor (:class:`_SpaceGuard`)."""
from __future__ import annotations

import errno
import os
import stat
import time

from .common import CLIError


#: the suffix of ``record``'s default output name: gzipped Chrome JSON (``-o`` keeps the name given)
DEFAULT_SUFFIX = ".json.gz"


class _Output:
    """The trace file of ``record``: opened once, before the command starts, never through a symbolic link, and
    locked while recorded.

    The file is created exclusively (O_EXCL) or, with ``force``, the existing one is opened without truncating
    it; O_NOFOLLOW makes the kernel refuse a symbolic link at the name, dangling or not, so nothing is written
    through one (the link is left as it is; directories above may be links). A regular file is then locked
    (``chrome_trace.lock_trace``: flock, close-on-exec so the command never holds it; the kernel drops it when
    sysprof ends, even by SIGKILL, so ``repair`` can then run) and a second recorder fails before its command
    starts. :meth:`truncate` empties an existing file once the command runs; :meth:`writer` hands the descriptor
    to the trace writer."""

    FLAGS = os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC

    def __init__(self, path: str, force: bool):
        self.path = path
        self.created = False  # whether the file is ours to remove when recording cannot start
        self.ident = None     # (st_dev, st_ino) of the file opened
        self.regular = False  # a regular file (not a device such as /dev/null)
        self.writer_fd = None  # the descriptor handed to the writer (valid while the writer is open)
        for _ in range(5):  # retried only when the name changes hands between the open and the lock
            try:
                self.fd = os.open(path, self.FLAGS | os.O_CREAT | os.O_EXCL, 0o666)
                self.created = True
            except FileExistsError:
                if not force:
                    raise CLIError(f"output exists: {path} (use --force to overwrite)") from None
                try:
                    # O_NONBLOCK: a FIFO without a reader must not block the open (it fails with ENXIO, or
                    # opens and is refused by _lock); cleared there for the file or device kept
                    self.fd = os.open(path, self.FLAGS | os.O_NONBLOCK)
                except FileNotFoundError:
                    continue  # removed in between: create it
                except OSError as e:
                    raise self._error(e) from None
            except OSError as e:
                raise self._error(e) from None
            if self._lock():
                return
        raise CLIError(f"cannot write {path}: it was replaced while being opened, again and again")

    def _error(self, e: OSError) -> CLIError:
        if e.errno == errno.ELOOP and os.path.islink(self.path):
            return _symlink_error(self.path)
        if isinstance(e, IsADirectoryError):
            return CLIError(f"output is a directory: {self.path}", status=2)
        if e.errno == errno.ENXIO:  # a FIFO or socket that the non-blocking open refused
            try:
                kind = os.stat(self.path).st_mode
            except OSError:
                kind = 0
            if stat.S_ISFIFO(kind) or stat.S_ISSOCK(kind):
                return _not_a_file(self.path, kind)
        return CLIError(f"cannot write {self.path}: {e.strerror or e}")

    def _lock(self) -> bool:
        """Lock a regular file; False (closed) when ``path`` no longer names the file opened."""
        from sysprof.trace.chrome import TraceBusyError, lock_trace

        st = os.fstat(self.fd)
        self.ident = (st.st_dev, st.st_ino)
        if stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode):
            self.close()
            raise _not_a_file(self.path, st.st_mode)
        os.set_blocking(self.fd, True)
        self.regular = stat.S_ISREG(st.st_mode)
        if not self.regular:
            return True  # a device such as /dev/null: nothing to lock or truncate
        try:
            lock_trace(self.fd, self.path)
        except TraceBusyError as e:
            self.close()
            who = f"pid {e.pid}" if e.pid else "another process"
            raise CLIError(f"output is in use: {self.path} is locked by {who} (another sysprof record or "
                           f"repair)") from None
        except OSError:
            pass  # a file system without flock: record unlocked, as before
        try:
            now = os.lstat(self.path)
        except OSError:
            now = None
        if now is None or (now.st_dev, now.st_ino) != self.ident:
            self.close()
            return False
        return True

    def truncate(self) -> None:
        if stat.S_ISREG(os.fstat(self.fd).st_mode):
            os.ftruncate(self.fd, 0)

    def writer(self, writer_class):
        fd, self.fd = self.fd, None
        self.writer_fd = fd
        return writer_class(self.path, fd=fd)

    def size(self) -> int:
        """Bytes in the file now (while its writer is open): what the file system holds, written or buffered by
        the kernel; 0 for a device."""
        return os.fstat(self.writer_fd).st_size if self.regular else 0

    def discard(self) -> None:
        """Recording did not start: remove the file if this run created it (still locked, by this descriptor or
        the writer's), then close this descriptor if not handed on."""
        if self.created:
            _remove_own(self.path, self.ident)
        self.close()

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _remove_own(path: str, ident) -> bool:
    """Remove ``path`` if it still is the file ``ident`` ((st_dev, st_ino)) this run created; whether it did."""
    if ident is None:
        return False
    try:
        now = os.lstat(path)
        if (now.st_dev, now.st_ino) == ident:
            os.unlink(path)
            return True
    except OSError:
        pass
    return False


def _not_a_file(path: str, mode: int) -> CLIError:
    what = "a FIFO" if stat.S_ISFIFO(mode) else "a socket"
    return CLIError(f"output is {what}: {path} (a trace is written to a file or a device)", status=2)


def _symlink_error(path: str) -> CLIError:
    try:
        target = f" -> {os.readlink(path)}"
    except OSError:  # replaced by something else meanwhile
        target = ""
    return CLIError(f"output is a symbolic link: {path}{target} (sysprof never writes through "
                    f"a link; give the file's own path)")


def _open_output(output, force, max_size=None):
    """The :class:`_Output` for ``-o`` (None: a new ``sysprof-YYYYmmdd-HHMMSS[-N]`` + :data:`DEFAULT_SUFFIX` in the
    current directory, the first such name that is not taken by anything, symbolic links included: created
    exclusively); with ``max_size``, the :class:`_Parts` of that name, its first part open."""
    if output is not None:
        return _Output(output, force) if max_size is None else _Parts(output, max_size)
    stem = time.strftime("sysprof-%Y%m%d-%H%M%S")
    for n in range(10000):
        path = f"{stem}{DEFAULT_SUFFIX}" if n == 0 else f"{stem}-{n}{DEFAULT_SUFFIX}"
        try:
            return _Output(path, False) if max_size is None else _Parts(path, max_size)
        except CLIError:
            if os.path.lexists(path) if max_size is None else _parts_taken(path):
                continue
            raise
    raise CLIError(f"cannot find an unused name {stem}-N{DEFAULT_SUFFIX}; give -o TRACE")


def _split_ext(output: str) -> tuple:
    """``(stem, suffix)`` of a trace name: ``.json.gz`` (any case) or the last extension."""
    n = len(".json.gz") if output.lower().endswith(".json.gz") else len(os.path.splitext(output)[1])
    return output[:len(output) - n], output[len(output) - n:]


def part_name(output: str, index: int) -> str:
    """The name of part ``index`` of ``-o output`` with ``--max-size``: ``trace.json`` -> ``trace.part0001.json``."""
    stem, ext = _split_ext(output)
    return f"{stem}.part{index:04d}{ext}"


def _parts_taken(output: str) -> list:
    """The part names of ``-o output`` (``STEM.partN.EXT``) taken by anything, in order."""
    stem, ext = _split_ext(output)
    folder, base = os.path.split(stem)
    base += ".part"
    try:
        names = os.listdir(folder or ".")
    except OSError:
        return []  # the open says why
    return sorted(os.path.join(folder, n) for n in names if n.startswith(base) and n.endswith(ext)
                  and n[len(base):len(n) - len(ext)].isdigit())


def check_parts_free(output: str) -> None:
    """Raises CLIError when any part name of ``-o output`` is taken."""
    taken = _parts_taken(output)
    if taken:
        more = f" and {len(taken) - 1} more" if len(taken) > 1 else ""
        raise CLIError(f"output exists: {taken[0]}{more} (parts of another recording; remove them or give another "
                       f"-o; --force does not apply to parts)")


#: with --max-size: a part is closed once it holds max_size / PARTS_KEPT bytes, and the oldest parts are removed so
#: that the parts kept hold at most max_size (the one being written counted as full)
PARTS_KEPT = 4
#: the smallest --max-size (a part must hold more than its head: the metadata and units)
MIN_MAX_SIZE = 64 << 10


class _Parts:
    """``record --max-size``: one recording written as numbered parts ``STEM.partNNNN.EXT`` of ``-o STEM.EXT``
    (``.json``, ``.json.gz``, ``.pftrace``), each a whole trace. Every part is created exclusively (the next free
    number when a name is taken meanwhile); a name already taken at the start refuses the recording, ``--force``
    or not (parts of an earlier recording are never overwritten or mixed in). Once :meth:`full` (``part_size``
    bytes), the recorder ends the part, calls :meth:`finished`, opens the next with :meth:`next`, and
    :meth:`prune` removes the oldest parts this run created while the finished ones kept plus one part's room
    exceed ``max_size``. :attr:`current` is the part being written (an :class:`_Output`)."""

    def __init__(self, output: str, max_size: int):
        self.output = output
        self.max_size = max_size
        self.part_size = max(max_size // PARTS_KEPT, 1)
        self.index = 0
        self.kept = []     # (path, ident, bytes) of the finished parts not removed, oldest first
        self.removed = 0   # parts removed to stay under max_size
        check_parts_free(output)
        self.current = None
        self.next()

    def path(self, index: int) -> str:
        return part_name(self.output, index)

    def next(self) -> _Output:
        """Open the next part (created exclusively): :attr:`current`."""
        for _ in range(1000):
            self.index += 1
            path = self.path(self.index)
            try:
                self.current = _Output(path, False)
                return self.current
            except CLIError:
                if self.current is None or not os.path.lexists(path):
                    raise
        raise CLIError(f"cannot find an unused part name after {path}")

    def full(self) -> bool:
        return self.current.size() >= self.part_size

    def finished(self) -> None:
        """The current part's writer is closed: count its bytes among the parts kept."""
        out = self.current
        try:
            size = os.lstat(out.path).st_size if out.regular else 0
        except OSError:
            size = 0
        self.kept.append((out.path, out.ident, size))

    def prune(self) -> None:
        """Remove the oldest finished parts while they and one part's room exceed ``max_size``."""
        while self.kept and sum(size for _, _, size in self.kept) + self.part_size > self.max_size:
            path, ident, _ = self.kept.pop(0)
            self.removed += _remove_own(path, ident)

    def summary(self) -> dict:
        """What the stop event says about the parts (``index``: this part's number)."""
        return {"index": self.index, "removed": self.removed, "max_size_bytes": self.max_size,
                "part_size_bytes": self.part_size}


#: the default free-space floor (--min-free): the larger of these bytes and this share of the file system, the
#: share counting at most the third number of bytes (1 % of a 100 TB shared file system is not "low")
DEFAULT_MIN_FREE = (256 << 20, 0.01, 4 << 30)


class _SpaceGuard:
    """The free-space floor of ``record`` (``--min-free``): :meth:`low` says (one ``statvfs``, about 1 µs: a few
    times a second, not per event) whether the file system of ``path`` has less than ``min_free`` (``(bytes,
    fraction[, cap of the fraction's bytes])``: the larger) available to unprivileged users (``f_bavail``). No floor (``(0, 0)``) or a device
    output: never low."""

    def __init__(self, path: str, min_free: tuple, regular: bool = True):
        self.folder = os.path.dirname(os.path.abspath(path))
        self.min_free = min_free
        self.enabled = regular and any(min_free)

    def low(self):
        """``(available bytes, floor bytes)`` when below the floor, else None (also when statvfs fails)."""
        if not self.enabled:
            return None
        try:
            st = os.statvfs(self.folder)
        except OSError:
            return None
        share = int(self.min_free[1] * st.f_blocks * st.f_frsize)
        if len(self.min_free) > 2:
            share = min(share, self.min_free[2])
        floor = max(self.min_free[0], share)
        avail = st.f_bavail * st.f_frsize
        return (avail, floor) if avail < floor else None
