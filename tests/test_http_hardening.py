"""The HTTP endpoint under hostile clients: size and header limits, slow clients, credentials,
paths.  A real aiohttp server on loopback, raw sockets for what HTTP clients will not send."""

from __future__ import annotations

import asyncio
import base64
import time

import bcrypt
import pytest

from exporters.prometheus.auth import BasicAuth
from exporters.prometheus.exposition import Exposition
from exporters.prometheus.server import MAX_HEADERS, MetricsServer
from neuron_monitor.selfstats import DaemonStats
from tests.prometheus_reports import emulated_reports

REPORT = emulated_reports("inf2.xlarge", count=2)[-1]  # built once, outside any event loop


async def started(**kwargs: object) -> MetricsServer:
    stats = DaemonStats()
    expo = Exposition(stats)
    expo.update(REPORT)
    server = MetricsServer(expo, stats, "127.0.0.1", 0, **kwargs)  # type: ignore[arg-type]
    await server.start()
    return server


async def raw(port: int, data: bytes, read_timeout: float = 5.0) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(65536), read_timeout)
    finally:
        writer.close()


async def test_too_many_headers_and_oversized_lines_are_refused() -> None:
    server = await started()
    try:
        many = "".join(f"X-H{i}: v\r\n" for i in range(MAX_HEADERS + 5))
        answer = await raw(server.port, f"GET /metrics HTTP/1.1\r\nHost: x\r\n{many}\r\n".encode())
        assert answer.split(b"\r\n")[0].split()[1] in (b"400", b"431")
        long_header = "X-Big: " + "a" * 10000
        answer = await raw(server.port, f"GET /metrics HTTP/1.1\r\nHost: x\r\n{long_header}\r\n\r\n".encode())
        assert answer.split(b"\r\n")[0].split()[1] in (b"400", b"431")
        long_url = "/metrics?" + "a" * 10000
        answer = await raw(server.port, f"GET {long_url} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert answer.split(b"\r\n")[0].split()[1] in (b"400", b"414")
        # a request body is refused (nothing here takes one)
        body = b"x" * 4096
        answer = await raw(server.port, b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 4096\r\n\r\n" + body)
        assert answer.split(b"\r\n")[0].split()[1] in (b"405", b"413")
        # and the server still answers properly afterwards
        answer = await raw(server.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 200")
    finally:
        await server.stop()


async def test_slow_clients_are_cut_off() -> None:
    server = await started(keepalive_timeout_s=1.0)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        started_at = time.monotonic()
        writer.write(b"GET /metrics HTTP/1.1\r\n")  # then trickle, never finishing the headers
        closed = False
        for _ in range(40):
            await asyncio.sleep(0.1)
            try:
                writer.write(b"X-Slow: 1\r\n")
                await writer.drain()
            except (ConnectionError, OSError):
                closed = True
                break
            if reader.at_eof():
                closed = True
                break
        if not closed:
            closed = await asyncio.wait_for(reader.read(), 2) == b""
        assert closed and time.monotonic() - started_at < 4.0
        writer.close()
        idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", server.port)
        assert await asyncio.wait_for(idle_reader.read(), 3) == b""  # an idle connection is closed too
        idle_writer.close()
    finally:
        await server.stop()


@pytest.mark.parametrize("path", ["/", "/metrics/", "/admin", "/../etc/passwd", "/healthz?x=1#y"])
async def test_only_documented_paths(path: str) -> None:
    server = await started()
    try:
        answer = await raw(server.port, f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        status = answer.split(b"\r\n")[0].split()[1]
        assert status == (b"200" if path.startswith("/healthz") else b"404")
    finally:
        await server.stop()


async def test_credentials_checked_in_constant_time_paths() -> None:
    hashed = bcrypt.hashpw(b"right", bcrypt.gensalt(rounds=4)).decode()
    auth = BasicAuth({"prom": hashed.encode()})
    calls: list[bytes] = []
    real = bcrypt.checkpw

    def spy(password: bytes, hashed_pw: bytes) -> bool:
        calls.append(hashed_pw)
        return real(password, hashed_pw)

    bcrypt.checkpw = spy  # count bcrypt calls: unknown users must cost one too
    try:
        def header(user: str, password: str) -> str:
            return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

        assert not await auth.check(header("nobody", "right"))
        assert not await auth.check(header("prom", "wrong"))
        assert await auth.check(header("prom", "right"))
        assert await auth.check(header("prom", "right"))  # cached: no bcrypt call
        assert not await auth.check("Basic !!!notbase64")
        assert not await auth.check("Bearer abc")
        assert not await auth.check(header("prom", "righ"))
    finally:
        bcrypt.checkpw = real
    assert len(calls) == 4  # nobody (dummy hash), wrong, right, righ: every failure costs a full check
