"""Loopback exposition servers the OpenMetrics tests control.

:class:`ControlledServer` (a threaded ``http.server``) answers each path with
what its ``routes`` say: a document, a delay before it, a status code, a
body that never ends, or a held-open silent connection.  The prometheus_client
exposition and Debian's prometheus-node-exporter run as real sources.
"""

from __future__ import annotations

import http.server
import os
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs

from tests.integration.pcpbed import free_port


@attrs.define
class Route:
    body: bytes = b""
    status: int = 200
    delay: float = 0.0  #: seconds before the answer
    endless: bool = False  #: trickle a line every 50 ms, forever
    firehose: bool = False  #: send chunks forever, as fast as possible
    silent: bool = False  #: never answer (hold the connection)
    headers: dict[str, str] = attrs.field(factory=dict)  #: extra response headers (Content-Encoding ...)
    make: Any = None  #: ``make(hits) -> bytes``: a body made afresh for each request
    hits: int = 0
    #: the headers of each request it answered (names lower-cased)
    requests: list[dict[str, str]] = attrs.field(factory=list)


class ControlledServer:
    """``http://127.0.0.1:PORT/NAME`` answers as ``routes[NAME]`` says."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.stop_event = threading.Event()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                route = server.routes.get(self.path.lstrip("/"))
                if route is None:
                    self.send_error(404)
                    return
                route.hits += 1
                route.requests.append({k.lower(): v for k, v in self.headers.items()})
                if route.silent:
                    server.stop_event.wait(60)
                    return
                if route.delay:
                    server.stop_event.wait(route.delay)
                if route.endless or route.firehose:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    chunk = b"x_total 1\n" * (1000 if route.firehose else 1)
                    try:
                        while not server.stop_event.is_set():
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                            self.wfile.flush()
                            if route.endless:
                                server.stop_event.wait(0.05)
                    except OSError:
                        pass
                    return
                body = route.make(route.hits) if route.make is not None else route.body
                self.send_response(route.status)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                for k, v in route.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:
                    pass

        class Quiet(http.server.ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a client that gave up (a refused or timed-out scrape) is not news

        self.httpd = Quiet(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    def __enter__(self) -> ControlledServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()
        self.httpd.shutdown()
        self.httpd.server_close()


_BOMBS: dict[int, bytes] = {}


def gzip_bomb(decoded: int = 2 << 30) -> bytes:
    """A gzip of a gzip of ``decoded`` zero bytes (``Content-Encoding: gzip,
    gzip``): 2 GiB is about 5 KB.  The inner member is made of identical
    fully flushed deflate blocks (so it costs a CRC pass, not a compression
    of the whole), with a correct trailer."""
    if decoded in _BOMBS:
        return _BOMBS[decoded]
    mib = bytes(1 << 20)
    n = max(2, decoded >> 20)
    c = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    first = c.compress(mib) + c.flush(zlib.Z_FULL_FLUSH)
    rep = c.compress(mib) + c.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(n):
        crc = zlib.crc32(mib, crc)
    parts = [b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff", first, rep * (n - 1), c.flush()]
    parts.append(struct.pack("<II", crc, (n << 20) & 0xFFFFFFFF))
    inner = b"".join(parts)
    outer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    _BOMBS[decoded] = outer.compress(inner) + outer.flush()
    return _BOMBS[decoded]


def wait_port(port: int, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listening on 127.0.0.1:{port}")


PROM_CLIENT_APP = r"""
import sys, time
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Summary, Info, start_http_server
reg = CollectorRegistry()
c = Counter("app_requests", "Requests served.", ["method", "code"], registry=reg)
c.labels("get", "200").inc(1027)
c.labels("post", "400").inc(3)
g = Gauge("app_temperature", "Temperature\nin the machine room.", unit="celsius", registry=reg)
g.set(21.5)
m = Gauge("app_memory_bytes", "Memory in use.", registry=reg)
m.set(4096)
h = Histogram("app_latency_seconds", "Request latency.", ["handler"], buckets=(0.1, 0.5, 1.0), registry=reg)
for v in (0.05, 0.2, 0.7, 3.0):
    h.labels("api").observe(v)
s = Summary("app_payload_bytes", "Payload sizes.", registry=reg)
s.observe(512)
s.observe(1024)
i = Info("app_build", "Build information.", registry=reg)
i.info({"version": "1.2.3", "branch": "main"})
start_http_server(int(sys.argv[1]), addr="127.0.0.1", registry=reg)
print("ready", flush=True)
time.sleep(3600)
"""


@contextmanager
def prometheus_client_app() -> Iterator[str]:
    """A Python prometheus_client exposition (fixed values) on a loopback port; yields its URL."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", PROM_CLIENT_APP, str(port)], stdout=subprocess.PIPE)
    try:
        wait_port(port)
        yield f"http://127.0.0.1:{port}/metrics"
    finally:
        proc.kill()
        proc.wait()


NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"


@contextmanager
def node_exporter(collectors: tuple[str, ...] = ("loadavg", "uname", "time", "filesystem")) -> Iterator[str]:
    """Debian's prometheus-node-exporter with a few collectors on a loopback port; yields its URL."""
    exe = shutil.which("prometheus-node-exporter") or NODE_EXPORTER
    if not os.path.exists(exe):
        import pytest

        msg = "prometheus-node-exporter not installed: run scripts/install-pcp"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    port = free_port()
    args = [exe, f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults"]
    args += [f"--collector.{c}" for c in collectors]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        yield f"http://127.0.0.1:{port}/metrics"
    finally:
        proc.kill()
        proc.wait()
