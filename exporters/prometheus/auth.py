"""Basic auth from a web-config file in the style of Prometheus' exporter-toolkit:

    basic_auth_users:
      prometheus: $2b$12$....   # bcrypt hash (htpasswd -nBC 12 "" | tr -d ':\\n')

bcrypt is slow on purpose (~100 ms or more per check), so a successful check is cached
(keyed by a SHA-256 of the credentials, compared in constant time); a failed one is not.
Unknown users are checked against a dummy hash so that the answer takes the same time
whether or not the user exists.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import hashlib
import hmac
from pathlib import Path

import bcrypt
import yaml

MAX_CACHE = 64


@functools.cache
def _dummy_hash() -> bytes:
    # Made on first use, not at import: a bcrypt hash costs tens of milliseconds of start-up.
    return bcrypt.hashpw(b"not-a-password", bcrypt.gensalt(rounds=10))


class WebConfigError(Exception):
    pass


class BasicAuth:
    def __init__(self, users: dict[str, bytes]) -> None:
        self._users = users
        self._cache: dict[str, bytes] = {}  # user -> sha256(user:password) that passed

    @classmethod
    def from_file(cls, path: str | Path) -> BasicAuth:
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise WebConfigError(f"{path}: cannot read: {exc.strerror}") from None
        except yaml.YAMLError as exc:
            raise WebConfigError(f"{path}: not valid YAML: {exc}".replace("\n", " ")) from None
        if not isinstance(data, dict):
            raise WebConfigError(f"{path}: expected a mapping with basic_auth_users")
        unknown = set(data) - {"basic_auth_users"}
        if unknown:
            raise WebConfigError(f"{path}: unsupported key(s): {', '.join(sorted(map(str, unknown)))} "
                                 "(TLS is set with --cert-file/--key-file)")
        users = data.get("basic_auth_users")
        if not isinstance(users, dict) or not users:
            raise WebConfigError(f"{path}: basic_auth_users must map user names to bcrypt hashes")
        parsed: dict[str, bytes] = {}
        for user, hashed in users.items():
            if not isinstance(hashed, str) or not hashed.startswith(("$2a$", "$2b$", "$2y$")):
                raise WebConfigError(f"{path}: basic_auth_users.{user}: not a bcrypt hash")
            parsed[str(user)] = hashed.encode()
        return cls(parsed)

    async def check(self, header: str) -> bool:
        scheme, _, encoded = header.partition(" ")
        if scheme.lower() != "basic" or not encoded:
            return False
        try:
            user, sep, password = base64.b64decode(encoded.strip(), validate=True).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        if not sep:
            return False
        digest = hashlib.sha256(f"{user}:{password}".encode()).digest()
        cached = self._cache.get(user)
        if cached is not None and hmac.compare_digest(cached, digest):
            return True
        hashed = self._users.get(user)
        ok = await asyncio.to_thread(bcrypt.checkpw, password.encode(), hashed or _dummy_hash())
        ok = ok and hashed is not None
        if ok:
            if len(self._cache) >= MAX_CACHE:
                self._cache.clear()
            self._cache[user] = digest
        return ok
