"""The endpoint's HTTP server: one thread and a selector serve every connection, so no client holds a thread, and
only a complete request head reaches the app (a WSGI app that reads no body: the endpoint's).

* At most ``max_connections`` are open. A new one closes the oldest of those still sending their head (or
  lingering after their answer), though not one taken in the same round, which has yet to be read (the new one
  waits in the backlog for a round); when every one is being answered, the new one gets 503.
* A head (request line and headers) must arrive whole within ``header_timeout`` seconds of the connect, however
  slowly it trickles in. A connection that ends or runs out of time before its head is complete is closed
  unanswered: the app never runs for it.
* A head over :data:`MAX_HEAD_BYTES` gets 431 (414 when its request line alone is that long), a request line
  that is not HTTP 400.
* One request per connection (``Connection: close``). The answer is written without blocking, within
  :data:`SEND_TIMEOUT_S`; then the server shuts its side and discards what the client still sends (a body
  nobody reads) for up to :data:`LINGER_S`, so that the client reads the whole answer rather than a reset.
* Requests completed in the same round that ask the same thing (method, path, query, Accept, Accept-Encoding)
  share one call of the app: one collection.
"""
from __future__ import annotations

import http.client
import io
import logging
import re
import selectors
import socket
import threading
import time
from email.utils import formatdate
from typing import Callable, Dict, List, Tuple
from urllib.parse import unquote

__all__ = ["HEADER_TIMEOUT_S", "MAX_CONNECTIONS", "MAX_HEAD_BYTES", "HTTPServer"]

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 64
HEADER_TIMEOUT_S = 5.0
SEND_TIMEOUT_S = 30.0
LINGER_S = 2.0
MAX_HEAD_BYTES = 32 * 1024
POLL_S = 0.2  # how soon the loop sees stop()
_END_OF_HEAD = re.compile(rb"\r?\n\r?\n")
_READ, _SEND, _LINGER = "read", "send", "linger"
_TEXT = [("Content-Type", "text/plain; charset=utf-8")]
Answer = Tuple[str, List[Tuple[str, str]], bytes]


class _BadRequest(Exception):
    pass


class _Conn:
    __slots__ = ("sock", "state", "deadline", "buf", "out")

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock, self.state, self.deadline, self.buf, self.out = sock, _READ, deadline, b"", memoryview(b"")


def _response(answer: Answer, head_only: bool = False) -> bytes:
    status, headers, body = answer
    lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers if k.lower() != "content-length"),
             f"Content-Length: {len(body)}", f"Date: {formatdate(usegmt=True)}", "Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1") + (b"" if head_only else body)


def _error(status: str) -> bytes:
    return _response((status, _TEXT, status.encode() + b"\n"))


def _environ(head: bytes) -> dict:
    """The WSGI environ of a complete head (only what the endpoint's app reads, which is what keys its answer);
    _BadRequest with the status otherwise."""
    line, _, rest = head.lstrip(b"\r\n").partition(b"\n")
    words = line.rstrip(b"\r").decode("iso-8859-1").split()
    if len(words) != 3 or re.fullmatch(r"HTTP/\d\.\d", words[2]) is None:
        raise _BadRequest("400 Bad Request")
    try:
        headers = http.client.parse_headers(io.BytesIO(rest + b"\r\n"))
    except http.client.HTTPException:  # over 100 headers
        raise _BadRequest("431 Request Header Fields Too Large") from None
    path, _, query = words[1].partition("?")
    environ = {"REQUEST_METHOD": words[0], "PATH_INFO": unquote(path, "iso-8859-1"), "QUERY_STRING": query}
    for name in ("Accept", "Accept-Encoding"):
        if headers.get(name) is not None:
            environ["HTTP_" + name.upper().replace("-", "_")] = headers.get(name)
    return environ


class HTTPServer:
    """Binds ``(host, port)`` (OSError when it cannot) and serves ``app`` from :meth:`serve_forever` (on the
    caller's thread) until :meth:`shutdown`; then it closes every socket."""

    def __init__(self, host: str, port: int, app: Callable, *, max_connections: int = MAX_CONNECTIONS,
                 header_timeout: float = HEADER_TIMEOUT_S) -> None:
        self._listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        try:
            self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._listener.bind((host, port))
            self._listener.listen(max(max_connections, 16))
            self._listener.setblocking(False)
        except BaseException:
            self._listener.close()
            raise
        self.server_address = self._listener.getsockname()
        self._app, self._cap, self._header_timeout = app, int(max_connections), float(header_timeout)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listener, selectors.EVENT_READ)
        self._conns: Dict[socket.socket, _Conn] = {}  # in the order of their connects
        self._stop = threading.Event()
        self._failed = False

    def shutdown(self) -> None:
        """Asks :meth:`serve_forever` to return (within :data:`POLL_S`)."""
        self._stop.set()

    def serve_forever(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    self._round()
                except Exception:  # noqa: BLE001 - the server goes on; a lasting fault is logged once, not spun on
                    self._log_once("the HTTP server failed")
                    self._stop.wait(POLL_S)
        finally:
            for conn in list(self._conns.values()):
                self._close(conn)
            self._sel.close()
            self._listener.close()

    def _log_once(self, what: str) -> None:
        if not self._failed:
            log.exception("sysprof prometheus: %s", what)
        self._failed = True

    def _round(self) -> None:
        now = time.monotonic()
        wait = min([POLL_S] + [c.deadline - now for c in self._conns.values()])
        complete: List[Tuple[_Conn, bytes]] = []
        accept = False
        for key, _ in self._sel.select(max(wait, 0.0)):
            conn = key.data
            if key.fileobj is self._listener:
                accept = True
            elif conn.state == _SEND:
                self._send(conn)
            else:
                self._read(conn, complete)
        if complete:
            self._answer(complete)
        if accept:  # after the others: what they closed makes room
            self._accept()
        now = time.monotonic()
        for conn in [c for c in self._conns.values() if c.deadline <= now]:
            self._close(conn)  # a head not complete in time, an answer not taken, a linger over: no answer

    def _accept(self) -> None:
        old = [c for c in self._conns.values() if c.state != _SEND]  # may be closed for a new one, oldest first
        for _ in range(self._cap):
            full = len(self._conns) >= self._cap
            if full and not old and any(c.state != _SEND for c in self._conns.values()):
                return  # full of connections taken just now, not yet read: the rest wait a round in the backlog
            try:
                sock, _ = self._listener.accept()
            except BlockingIOError:
                return
            except OSError:  # out of descriptors: they wait in the backlog
                self._log_once("cannot accept a connection")
                self._stop.wait(POLL_S / 4)
                return
            sock.setblocking(False)
            if full and not old:  # every one is being answered
                try:
                    sock.send(_error("503 Service Unavailable"))
                except OSError:
                    pass
                sock.close()
                continue
            if full:
                self._close(old.pop(0))
            conn = _Conn(sock, time.monotonic() + self._header_timeout)
            self._conns[sock] = conn
            self._sel.register(sock, selectors.EVENT_READ, conn)

    def _read(self, conn: _Conn, complete: List[Tuple[_Conn, bytes]]) -> None:
        try:  # a head is kept to MAX_HEAD_BYTES + 1 bytes; after the answer, what still comes is dropped
            data = conn.sock.recv(65536 if conn.state == _LINGER else MAX_HEAD_BYTES + 1 - len(conn.buf))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # gone, its head unfinished (or after its answer): closed, nothing collected
            self._close(conn)
            return
        if conn.state == _LINGER:
            return
        start = max(0, len(conn.buf) - 3)
        conn.buf += data
        end = _END_OF_HEAD.search(conn.buf, start)
        if end is not None and end.end() <= MAX_HEAD_BYTES:
            conn.state = _SEND  # answered in this round
            complete.append((conn, conn.buf[:end.start()]))
        elif end is not None or len(conn.buf) > MAX_HEAD_BYTES:
            line_done = b"\n" in conn.buf[:MAX_HEAD_BYTES]
            self._start_send(conn, _error("431 Request Header Fields Too Large" if line_done else "414 URI Too Long"))

    def _answer(self, complete: List[Tuple[_Conn, bytes]]) -> None:
        answers: Dict[tuple, Answer] = {}
        for conn, head in complete:
            try:
                environ = _environ(head)
            except _BadRequest as e:
                self._start_send(conn, _error(str(e)))
                continue
            key = tuple(sorted(environ.items()))
            if key not in answers:
                answers[key] = self._call(environ)
            self._start_send(conn, _response(answers[key], head_only=environ["REQUEST_METHOD"] == "HEAD"))

    def _call(self, environ: dict) -> Answer:
        got: list = []
        environ = dict(environ, **{"SERVER_PROTOCOL": "HTTP/1.1", "wsgi.input": io.BytesIO()})
        try:
            chunks = self._app(environ, lambda status, headers, exc_info=None: got.extend((status, headers)))
            body = b"".join(chunks)
            return got[0], got[1], body
        except Exception:  # noqa: BLE001 - one bad answer, the server goes on
            self._log_once("an answer failed")
            return "500 Internal Server Error", _TEXT, b"500 Internal Server Error\n"

    def _start_send(self, conn: _Conn, data: bytes) -> None:
        conn.state, conn.out, conn.buf = _SEND, memoryview(data), b""
        conn.deadline = time.monotonic() + SEND_TIMEOUT_S
        self._sel.modify(conn.sock, selectors.EVENT_WRITE, conn)
        self._send(conn)  # most answers fit the socket's buffer: written at once

    def _send(self, conn: _Conn) -> None:
        try:
            conn.out = conn.out[conn.sock.send(conn.out):]
            if not conn.out:
                conn.sock.shutdown(socket.SHUT_WR)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        if not conn.out:
            conn.state, conn.deadline = _LINGER, time.monotonic() + LINGER_S
            self._sel.modify(conn.sock, selectors.EVENT_READ, conn)

    def _close(self, conn: _Conn) -> None:
        self._conns.pop(conn.sock, None)
        try:
            self._sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()
