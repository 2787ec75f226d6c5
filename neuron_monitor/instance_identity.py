"""`instance_info` from EC2 instance metadata (IMDSv2), fetched once at start-up.

Off EC2 the metadata address does not answer; the timeouts are short enough that the
whole attempt costs well under a second, and the report then carries empty fields and an
`error` saying why.  The endpoint and the off switch follow the AWS SDK's environment
variables (`AWS_EC2_METADATA_SERVICE_ENDPOINT`, `AWS_EC2_METADATA_DISABLED`).
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import aiohttp

from neuron_monitor.report import InstanceInfo

DEFAULT_ENDPOINT = "http://169.254.169.254"
TOKEN_TTL_S = 21600
CONNECT_TIMEOUT_S = 0.25
TOTAL_BUDGET_S = 0.8

# report field -> metadata path; the first three decide whether we call it a failure
_REQUIRED = {
    "instance_id": "instance-id",
    "instance_type": "instance-type",
    "instance_availability_zone": "placement/availability-zone",
    "ami_id": "ami-id",
}
# Not present on instances launched before 2020-08-24, or without tags in metadata.
_OPTIONAL = {
    "instance_availability_zone_id": "placement/availability-zone-id",
    "instance_region": "placement/region",
    "instance_name": "tags/instance/Name",
}


def metadata_endpoint() -> str:
    return os.environ.get("AWS_EC2_METADATA_SERVICE_ENDPOINT", DEFAULT_ENDPOINT).rstrip("/")


def metadata_disabled() -> bool:
    return os.environ.get("AWS_EC2_METADATA_DISABLED", "").strip().lower() in {"1", "true", "yes"}


async def fetch_instance_info(endpoint: str | None = None, budget_s: float = TOTAL_BUDGET_S) -> InstanceInfo:
    """Never raises: every failure becomes `InstanceInfo.error`."""
    if metadata_disabled():
        return InstanceInfo(error="instance metadata disabled (AWS_EC2_METADATA_DISABLED)")
    import aiohttp  # only when metadata is really fetched: aiohttp's client costs ~0.1 s of start-up

    base = (endpoint or metadata_endpoint()) + "/latest"
    timeout = aiohttp.ClientTimeout(total=budget_s, sock_connect=CONNECT_TIMEOUT_S)
    try:
        async with asyncio.timeout(budget_s), aiohttp.ClientSession(timeout=timeout) as session:
            return await _fetch(session, base)
    except TimeoutError:
        return InstanceInfo(error=f"instance metadata unavailable: no answer from {base} within {budget_s}s")
    except aiohttp.ClientError as exc:
        return InstanceInfo(error=f"instance metadata unavailable: {exc or type(exc).__name__}")


async def _fetch(session: aiohttp.ClientSession, base: str) -> InstanceInfo:
    async with session.put(
        f"{base}/api/token", headers={"X-aws-ec2-metadata-token-ttl-seconds": str(TOKEN_TTL_S)}
    ) as resp:
        if resp.status != 200:
            return InstanceInfo(error=f"instance metadata token request failed: HTTP {resp.status}")
        token = (await resp.text()).strip()
    headers = {"X-aws-ec2-metadata-token": token}

    async def get(path: str) -> str | None:
        async with session.get(f"{base}/meta-data/{path}", headers=headers) as r:
            return (await r.text()).strip() if r.status == 200 else None

    paths = {**_REQUIRED, **_OPTIONAL, "mac": "mac"}
    values = dict(zip(paths, await asyncio.gather(*(get(p) for p in paths.values())), strict=True))
    subnet = None
    if values.get("mac"):
        subnet = await get(f"network/interfaces/macs/{values['mac']}/subnet-id")
    missing = [field for field in _REQUIRED if not values.get(field)]
    if subnet is None:
        missing.append("subnet_id")
    fields = {f: values.get(f) or "" for f in (*_REQUIRED, *_OPTIONAL)}
    if not fields["instance_region"] and fields["instance_availability_zone"]:
        fields["instance_region"] = fields["instance_availability_zone"][:-1]  # "us-west-2b" -> "us-west-2"
    error = f"instance metadata incomplete: missing {', '.join(missing)}" if missing else ""
    return InstanceInfo(**fields, subnet_id=subnet or "", error=error)
