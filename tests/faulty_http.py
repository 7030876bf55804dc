"""A real HTTP server on 127.0.0.1 that serves a folder and misbehaves on purpose, per path.

Each path has a script of faults, one per request, used up in order; then it behaves. Every
request is logged (path, Range header, status, time) so tests can count retries and resumes."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

FAULTS = ("reset", "503", "429", "slow", "pause", "ignore_range", "404", "short", "garble")


@dataclass
class Request:
    path: str
    range: str | None
    status: int
    at: float


@dataclass
class FaultyServer:
    root: Path
    faults: dict[str, list[str]] = field(default_factory=dict)  # url path -> faults in order
    always: dict[str, str] = field(default_factory=dict)  # url path -> fault on every request
    stall_s: float = 1.0  # how long "slow" stalls mid-body
    retry_after: int = 1
    log: list[Request] = field(default_factory=list)
    in_flight: int = 0
    most_in_flight: int = 0  # the most requests pausing at once

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._httpd.handle_error = lambda request, address: None  # clients we cut off on purpose
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> FaultyServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def next_fault(self, path: str) -> str:
        with self._lock:
            if path in self.always:
                return self.always[path]
            script = self.faults.get(path)
            return script.pop(0) if script else "ok"

    def record(self, path: str, range_: str | None, status: int) -> None:
        with self._lock:
            self.log.append(Request(path, range_, status, time.monotonic()))

    def requests(self, path: str | None = None) -> list[Request]:
        with self._lock:
            return [r for r in self.log if path is None or r.path == path]


def _handler(server: FaultyServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            path = self.path.lstrip("/")
            fault = server.next_fault(path)
            range_ = self.headers.get("Range")
            file = server.root / path
            if fault in ("503", "404", "429") or not file.is_file():
                status = int(fault) if fault in ("503", "404", "429") else 404
                server.record(path, range_, status)
                self.send_response(status)
                if status == 429:
                    self.send_header("Retry-After", str(server.retry_after))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            data = file.read_bytes()
            start = int(range_.split("=")[1].split("-")[0]) if range_ else 0
            if range_ and fault != "ignore_range":
                body, status = data[start:], 206
            else:
                body, status = data, 200
            server.record(path, range_, status)
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.end_headers()
            half = len(body) // 2
            if fault == "garble":  # the right length, wrong bytes in the middle
                body = body[:half] + bytes(64) + body[half + 64:]
            if fault == "reset":
                self.wfile.write(body[:half])
                self.wfile.flush()
                time.sleep(0.2)  # let the client read it: a reset drops unread bytes
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
                self.connection.close()  # RST mid-body
                return
            if fault == "short":  # closes early, cleanly, without an error
                self.wfile.write(body[:half])
                return
            if fault == "pause":  # slow to start, then whole; pauses at once are counted
                with server._lock:
                    server.in_flight += 1
                    server.most_in_flight = max(server.most_in_flight, server.in_flight)
                time.sleep(server.stall_s)
                with server._lock:
                    server.in_flight -= 1
            if fault == "slow":
                self.wfile.write(body[:half])
                self.wfile.flush()
                time.sleep(server.stall_s)
                with contextlib.suppress(OSError):  # the client gave up waiting
                    self.wfile.write(body[half:])
                return
            self.wfile.write(body)

    return Handler
