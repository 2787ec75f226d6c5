"""Command-line options shared by the in-process endpoint and the pipeline front end."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from exporters.prometheus.auth import BasicAuth


@dataclass(frozen=True, slots=True)
class TlsFiles:
    cert_file: str
    key_file: str


def port_number(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port out of range: {value}")
    return value


def tls_files(cert: str | None, key: str | None) -> TlsFiles | None:
    if bool(cert) != bool(key):
        raise ValueError("--cert-file and --key-file must be given together")
    return TlsFiles(cert, key) if cert and key else None


def basic_auth(path: str | None) -> BasicAuth | None:
    if not path:
        return None
    from exporters.prometheus.auth import BasicAuth, WebConfigError

    try:
        return BasicAuth.from_file(path)
    except WebConfigError as exc:
        raise ValueError(str(exc)) from None
