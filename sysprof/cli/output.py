"""The trace file of ``sysprof record``: created exclusively or opened without truncating, never through a
symbolic link, locked (flock) while recorded, named ``sysprof-YYYYmmdd-HHMMSS[-N].json`` by default."""
from __future__ import annotations

import errno
import os
import stat
import time

from .common import CLIError


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
        if not stat.S_ISREG(st.st_mode):
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
        return writer_class(self.path, fd=fd)

    def discard(self) -> None:
        """Recording did not start: remove the file if this run created it (still locked, by this descriptor or
        the writer's), then close this descriptor if not handed on."""
        if self.created and self.ident is not None:
            try:
                now = os.lstat(self.path)
                if (now.st_dev, now.st_ino) == self.ident:
                    os.unlink(self.path)
            except OSError:
                pass
        self.close()

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


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


def _open_output(output, force):
    """The :class:`_Output` for ``-o`` (None: a new ``sysprof-YYYYmmdd-HHMMSS[-N].json`` in the current directory,
    the first such name that is not taken by anything, symbolic links included: created exclusively)."""
    if output is not None:
        return _Output(output, force)
    stem = time.strftime("sysprof-%Y%m%d-%H%M%S")
    for n in range(10000):
        path = f"{stem}.json" if n == 0 else f"{stem}-{n}.json"
        try:
            return _Output(path, False)
        except CLIError:
            if os.path.lexists(path):
                continue
            raise
    raise CLIError(f"cannot find an unused name {stem}-N.json; give -o TRACE")
