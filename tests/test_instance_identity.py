"""The IMDSv2 client against a real HTTP server on loopback that plays the metadata service."""

from __future__ import annotations

import socket
import time
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from neuron_monitor.instance_identity import fetch_instance_info

META = {
    "instance-id": "i-0123456789abcdef0",
    "instance-type": "trn1.32xlarge",
    "placement/availability-zone": "us-west-2d",
    "placement/availability-zone-id": "usw2-az4",
    "placement/region": "us-west-2",
    "ami-id": "ami-0abc",
    "mac": "0a:1b:2c:3d:4e:5f",
    "network/interfaces/macs/0a:1b:2c:3d:4e:5f/subnet-id": "subnet-1234",
    "tags/instance/Name": "trainer-7",
}


def imds_app(meta: dict[str, str], require_token: bool = True) -> web.Application:
    async def token(request: web.Request) -> web.Response:
        assert request.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
        return web.Response(text="TOKEN123")

    async def get(request: web.Request) -> web.Response:
        if require_token and request.headers.get("X-aws-ec2-metadata-token") != "TOKEN123":
            return web.Response(status=401)
        value = meta.get(request.match_info["path"])
        return web.Response(text=value) if value is not None else web.Response(status=404)

    app = web.Application()
    app.router.add_put("/latest/api/token", token)
    app.router.add_get("/latest/meta-data/{path:.*}", get)
    return app


@pytest.fixture
async def serve() -> AsyncIterator[object]:
    runners: list[web.AppRunner] = []

    async def start(app: web.Application) -> str:
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = runner.addresses[0][1]
        return f"http://127.0.0.1:{port}"

    yield start
    for runner in runners:
        await runner.cleanup()


async def test_full_identity(serve, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("AWS_EC2_METADATA_DISABLED")
    url = await serve(imds_app(META))
    info = await fetch_instance_info(url)
    assert info.model_dump() == {
        "instance_name": "trainer-7", "instance_id": "i-0123456789abcdef0", "instance_type": "trn1.32xlarge",
        "instance_availability_zone": "us-west-2d", "instance_availability_zone_id": "usw2-az4",
        "instance_region": "us-west-2", "ami_id": "ami-0abc", "subnet_id": "subnet-1234", "error": ""}


async def test_old_instance_without_optional_fields(serve, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("AWS_EC2_METADATA_DISABLED")
    meta = {k: v for k, v in META.items() if not k.startswith(("placement/region", "placement/availability-zone-id",
                                                                "tags/"))}
    info = await fetch_instance_info(await serve(imds_app(meta)))
    assert info.error == ""
    assert info.instance_region == "us-west-2"  # derived from the availability zone
    assert info.instance_name == ""


async def test_missing_required_field_is_an_error(serve, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("AWS_EC2_METADATA_DISABLED")
    meta = {k: v for k, v in META.items() if k != "instance-id"}
    info = await fetch_instance_info(await serve(imds_app(meta)))
    assert info.error == "instance metadata incomplete: missing instance_id"
    assert info.instance_type == "trn1.32xlarge"


async def test_token_refused(serve, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("AWS_EC2_METADATA_DISABLED")
    async def refuse(request: web.Request) -> web.Response:
        return web.Response(status=403)

    app = web.Application()
    app.router.add_put("/latest/api/token", refuse)
    info = await fetch_instance_info(await serve(app))
    assert info.error == "instance metadata token request failed: HTTP 403"


async def test_nothing_listening_fails_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_EC2_METADATA_DISABLED")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    info = await fetch_instance_info(f"http://127.0.0.1:{port}")
    assert time.monotonic() - started < 1.0
    assert info.error.startswith("instance metadata unavailable")
    assert info.instance_id == ""


async def test_a_silent_server_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that accepts and never answers (a black hole) costs under a second."""
    monkeypatch.delenv("AWS_EC2_METADATA_DISABLED")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        started = time.monotonic()
        info = await fetch_instance_info(f"http://127.0.0.1:{port}")
        elapsed = time.monotonic() - started
    assert elapsed < 1.0
    assert "no answer" in info.error


async def test_disabled_by_environment() -> None:
    info = await fetch_instance_info("http://127.0.0.1:9")
    assert info.error == "instance metadata disabled (AWS_EC2_METADATA_DISABLED)"
