"""The HTTP endpoint: /metrics, /healthz, /ready; optional TLS (reloaded when the files
change) and basic auth (bcrypt hashes, as in Prometheus' exporter-toolkit web config).

Nothing here touches devices: /metrics serves the exposition rendered at the latest report.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
from collections.abc import Awaitable, Callable

from aiohttp import web

from exporters.prometheus.auth import BasicAuth
from exporters.prometheus.exposition import Exposition
from exporters.prometheus.options import TlsFiles
from neuron_monitor.selfstats import DaemonStats

log = logging.getLogger(__name__)

TLS_CHECK_INTERVAL_S = 2.0
# A connection that has not sent a complete request within this long is closed, whether it
# is idle or trickling bytes (slow-client protection; aiohttp's keep-alive timer runs from the
# moment a connection opens).  Prometheus scrapes well within it.
KEEPALIVE_TIMEOUT_S = 15.0
MAX_LINE = 4096
MAX_FIELD = 4096
MAX_HEADERS = 32
PATHS = ("/metrics", "/healthz", "/ready")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ReloadingTls:
    """An SSL context whose certificate follows the files: checked every few seconds and
    reloaded into the same context, so new connections get the new certificate."""

    def __init__(self, files: TlsFiles) -> None:
        self.files = files
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self._stamp = self._mtimes()
        self.context.load_cert_chain(files.cert_file, files.key_file)
        self.reloads = 0
        self._task: asyncio.Task[None] | None = None

    def _mtimes(self) -> tuple[float, float]:
        return (os.stat(self.files.cert_file).st_mtime_ns, os.stat(self.files.key_file).st_mtime_ns)

    def check(self) -> bool:
        """Reload if the files changed; True when a new certificate was loaded."""
        try:
            stamp = self._mtimes()
        except OSError as exc:
            log.warning("TLS: cannot stat certificate files: %s", exc)
            return False
        if stamp == self._stamp:
            return False
        try:
            self.context.load_cert_chain(self.files.cert_file, self.files.key_file)
        except (OSError, ssl.SSLError) as exc:
            # Often a certificate and key caught half-way through being replaced: try again later.
            log.warning("TLS: new certificate not loaded yet: %s", exc)
            return False
        self._stamp = stamp
        self.reloads += 1
        log.info("TLS: certificate reloaded from %s", self.files.cert_file)
        return True

    def start(self) -> None:
        self._task = asyncio.create_task(self._watch(), name="tls-reload")

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(TLS_CHECK_INTERVAL_S)
            self.check()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def wants_openmetrics(accept: str) -> bool:
    return "application/openmetrics-text" in accept


def wants_gzip(accept_encoding: str) -> bool:
    for part in accept_encoding.split(","):
        name, _, params = part.strip().partition(";")
        if name.strip().lower() == "gzip":
            return params.replace(" ", "") not in ("q=0", "q=0.0")
    return False


class MetricsServer:
    def __init__(self, exposition: Exposition, stats: DaemonStats, address: str, port: int, *,
                 tls: TlsFiles | None = None, auth: BasicAuth | None = None,
                 keepalive_timeout_s: float = KEEPALIVE_TIMEOUT_S) -> None:
        self.exposition = exposition
        self.keepalive_timeout_s = keepalive_timeout_s
        self.stats = stats
        self.address = address
        self.port = port
        self.auth = auth
        self.tls = ReloadingTls(tls) if tls else None
        self._runner: web.AppRunner | None = None
        self.scrapes = 0

    def app(self) -> web.Application:
        app = web.Application(client_max_size=1024, middlewares=[self._guard])
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/ready", self._ready)
        return app

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path not in PATHS:
            return web.Response(status=404, text="not found\n")
        if request.method not in ("GET", "HEAD"):
            return web.Response(status=405, text="method not allowed\n", headers={"Allow": "GET, HEAD"})
        authorization = request.headers.get("Authorization", "")
        if request.path == "/metrics" and self.auth is not None and not await self.auth.check(authorization):
            return web.Response(status=401, text="unauthorized\n",
                                    headers={"WWW-Authenticate": 'Basic realm="neuron-monitor"'})
        return await handler(request)

    async def _metrics(self, request: web.Request) -> web.Response:
        self.scrapes += 1
        openmetrics = wants_openmetrics(request.headers.get("Accept", ""))
        compress = wants_gzip(request.headers.get("Accept-Encoding", ""))
        body, ctype = self.exposition.body(openmetrics, compress)
        headers = {"Content-Type": ctype, "Vary": "Accept, Accept-Encoding"}
        if compress:
            headers["Content-Encoding"] = "gzip"
        return web.Response(body=body, headers=headers)

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _ready(self, request: web.Request) -> web.Response:
        if self.stats.is_ready():
            return web.Response(text="ready\n")
        age = self.stats.report_age_s()
        why = "no report yet" if age is None else f"latest report is {age:.1f}s old"
        return web.Response(status=503, text=f"not ready: {why}\n")

    async def start(self) -> None:
        self._runner = web.AppRunner(
            self.app(), handle_signals=False, access_log=None, keepalive_timeout=self.keepalive_timeout_s,
            max_line_size=MAX_LINE, max_field_size=MAX_FIELD, max_headers=MAX_HEADERS,
        )
        await self._runner.setup()
        host = self.address or None  # "" = every interface, like the original
        site = web.TCPSite(self._runner, host, self.port, ssl_context=self.tls.context if self.tls else None,
                           reuse_address=True)
        await site.start()
        if self.tls:
            self.tls.start()
        if self.port == 0:
            self.port = self.bound_port()
        log.info("Prometheus endpoint on %s:%d (%s)", self.address or "*", self.port,
                 "https" if self.tls else "http")

    def bound_port(self) -> int:
        assert self._runner is not None  # noqa: S101 - called after start()
        for address in self._runner.addresses:
            if isinstance(address, tuple):
                return int(address[1])
        return self.port

    async def stop(self) -> None:
        if self.tls:
            await self.tls.stop()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
