"""A small fault-injecting HTTP proxy for CloudWatch tests, run as its own process.

    python -m tests.fault_proxy LISTEN_PORT UPSTREAM_URL

Forwards every request to the upstream (moto in server mode) and counts PutMetricData
calls.  `POST /_fault?mode=M&count=N` makes the next N PutMetricData calls fail with mode M:
`throttle` (400 Throttling, in the error format of the request's protocol: JSON or CBOR), `error500`,
`stall` (hold the request without answering for `seconds`, default 30), `drop` (close the
connection without a response).  `GET /_stats` answers the counts as JSON.
"""

from __future__ import annotations

import asyncio
import json
import sys

import aiohttp
from aiohttp import web


class Proxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.mode = "pass"
        self.remaining = 0
        self.stall_s = 30.0
        self.stats = {"put_forwarded": 0, "put_failed": 0, "requests": 0}
        self.session: aiohttp.ClientSession | None = None

    async def control(self, request: web.Request) -> web.Response:
        self.mode = request.query.get("mode", "pass")
        self.remaining = int(request.query.get("count", "1000000"))
        self.stall_s = float(request.query.get("seconds", "30"))
        return web.json_response({"mode": self.mode, "count": self.remaining})

    async def stats_handler(self, request: web.Request) -> web.Response:
        return web.json_response(self.stats)

    async def forward(self, request: web.Request) -> web.StreamResponse:
        self.stats["requests"] += 1
        body = await request.read()
        is_put = "PutMetricData" in request.path or b"PutMetricData" in body[:200] or \
            "PutMetricData" in request.headers.get("X-Amz-Target", "")
        if is_put and self.mode != "pass" and self.remaining > 0:
            self.remaining -= 1
            self.stats["put_failed"] += 1
            cbor = "cbor" in request.headers.get("Content-Type", "")
            if self.mode in ("throttle", "error500"):
                status, code = (400, "Throttling") if self.mode == "throttle" else (500, "InternalServiceError")
                if cbor:
                    body_out = (b"\xa2\x66__type" + bytes([0x60 + len(code)]) + code.encode()
                                + b"\x67message\x64fail")
                    return web.Response(status=status, body=body_out, headers={
                        "Content-Type": "application/cbor", "smithy-protocol": "rpc-v2-cbor"})
                return web.Response(status=status, text=json.dumps({"__type": code, "message": "fail"}), headers={
                    "Content-Type": "application/x-amz-json-1.0",
                    "x-amzn-query-error": f"{code};{'Sender' if status < 500 else 'Receiver'}"})
            if self.mode == "stall":
                await asyncio.sleep(self.stall_s)
            if self.mode in ("drop", "stall"):
                if request.transport is not None:
                    request.transport.abort()
                raise ConnectionResetError("dropped on purpose")
        if is_put:
            self.stats["put_forwarded"] += 1
        assert self.session is not None
        # aiohttp has already decompressed a gzip request body: forward it as plain bytes.
        headers = {k: v for k, v in request.headers.items()
                   if k.lower() not in ("host", "content-length", "content-encoding")}
        async with self.session.request(request.method, self.upstream + request.path_qs, data=body,
                                        headers=headers) as resp:
            payload = await resp.read()
            out_headers = {k: v for k, v in resp.headers.items()
                           if k.lower() not in ("content-length", "transfer-encoding", "content-encoding",
                                                "connection")}
            return web.Response(status=resp.status, body=payload, headers=out_headers)


async def main(port: int, upstream: str) -> None:
    proxy = Proxy(upstream)
    proxy.session = aiohttp.ClientSession()
    app = web.Application(client_max_size=16 * 1024 * 1024)
    app.router.add_post("/_fault", proxy.control)
    app.router.add_get("/_stats", proxy.stats_handler)
    app.router.add_route("*", "/{tail:.*}", proxy.forward)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    print("ready", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
