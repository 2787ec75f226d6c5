"""The in-process endpoint and the pipeline front end, over real HTTP."""

from __future__ import annotations

import base64
import datetime
import gzip
import json
import os
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import bcrypt
import pytest

from tests.conftest import monitor_command, subprocess_env
from tests.daemon_process import ALL_1S, running_daemon, wait_http
from tests.prometheus_server import free_port


def get(url: str, headers: dict[str, str] | None = None, context: ssl.SSLContext | None = None,
        method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


def test_endpoints_and_negotiation() -> None:
    with running_daemon("--emulate", "trn2.48xlarge", "-c", ALL_1S) as (_, port):
        base = f"http://127.0.0.1:{port}"
        status, headers, body = get(f"{base}/metrics")
        assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
        assert b"neuroncore_utilization_ratio{" in body and b"# EOF" not in body
        status, headers, om = get(f"{base}/metrics", {"Accept": "application/openmetrics-text; version=1.0.0"})
        assert headers["Content-Type"].startswith("application/openmetrics-text")
        assert om.endswith(b"# EOF\n")
        status, headers, packed = get(f"{base}/metrics", {"Accept-Encoding": "gzip"})
        assert headers["Content-Encoding"] == "gzip"
        text = gzip.decompress(packed)  # two gzip members: the report part and the self-metrics
        assert b"neuroncore_utilization_ratio{" in text and b"neuron_monitor_report_age_seconds" in text
        assert get(f"{base}/healthz")[0] == 200
        assert get(f"{base}/ready")[0] == 200
        assert get(f"{base}/other")[0] == 404
        assert get(f"{base}/metrics", method="POST")[0] == 405
        assert get(f"{base}/metrics", method="HEAD")[0] == 200


async def test_ready_follows_the_age_of_the_latest_report() -> None:
    from exporters.prometheus.exposition import Exposition
    from exporters.prometheus.server import MetricsServer
    from neuron_monitor.selfstats import DaemonStats

    stats = DaemonStats(shortest_period_s=1.0)
    server = MetricsServer(Exposition(stats), stats, "127.0.0.1", 0)
    await server.start()
    try:
        url = f"http://127.0.0.1:{server.port}/ready"
        import asyncio

        status, _, body = await asyncio.to_thread(get, url)
        assert (status, body) == (503, b"not ready: no report yet\n")
        stats.last_report_monotonic = time.monotonic()
        assert (await asyncio.to_thread(get, url))[0] == 200
        stats.last_report_monotonic = time.monotonic() - 3.5  # older than three periods
        status, _, body = await asyncio.to_thread(get, url)
        assert status == 503 and b"old" in body
    finally:
        await server.stop()


def make_cert(directory: Path, name: str) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(__import__("ipaddress").ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def peer_common_name(port: int) -> str:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            context.wrap_socket(raw) as tls:
        der = tls.getpeercert(binary_form=True)
    from cryptography import x509

    cert = x509.load_der_x509_certificate(der)
    return str(cert.subject.rfc4514_string())


def test_https_and_certificate_reload(tmp_path: Path) -> None:
    cert, key = make_cert(tmp_path, "first")
    live_cert, live_key = tmp_path / "live.crt", tmp_path / "live.key"
    live_cert.write_bytes(cert.read_bytes())
    live_key.write_bytes(key.read_bytes())
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE
    with running_daemon("--emulate", "inf2.xlarge", "-c", ALL_1S, "--cert-file", str(live_cert),
                        "--key-file", str(live_key), scheme="https", context=insecure) as (_, port):
        trusted = ssl.create_default_context(cafile=str(cert))
        trusted.check_hostname = False
        status, _, body = get(f"https://127.0.0.1:{port}/metrics", context=trusted)
        assert status == 200 and b"instance_info" in body
        assert peer_common_name(port) == "CN=first"
        old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        old.maximum_version = ssl.TLSVersion.TLSv1_1
        old.check_hostname = False
        old.verify_mode = ssl.CERT_NONE
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            get(f"https://127.0.0.1:{port}/healthz", context=old)  # TLS 1.1 is refused
        new_cert, new_key = make_cert(tmp_path, "second")
        os.replace(new_key, live_key)
        os.replace(new_cert, live_cert)
        deadline = time.monotonic() + 15
        while peer_common_name(port) != "CN=second":
            assert time.monotonic() < deadline, "certificate not reloaded"
            time.sleep(0.3)


def test_basic_auth(tmp_path: Path) -> None:
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    config = tmp_path / "web.yml"
    config.write_text(f"basic_auth_users:\n  prom: {hashed}\n")
    with running_daemon("--emulate", "inf2.xlarge", "-c", ALL_1S, "--web-config", str(config)) as (_, port):
        url = f"http://127.0.0.1:{port}/metrics"
        assert get(url)[0] == 401
        bad = base64.b64encode(b"prom:wrong").decode()
        assert get(url, {"Authorization": f"Basic {bad}"})[0] == 401
        nobody = base64.b64encode(b"eve:s3cret").decode()
        assert get(url, {"Authorization": f"Basic {nobody}"})[0] == 401
        good = base64.b64encode(b"prom:s3cret").decode()
        for _ in range(3):  # the second and later checks come from the cache
            assert get(url, {"Authorization": f"Basic {good}"})[0] == 200
        assert get(f"http://127.0.0.1:{port}/healthz")[0] == 200  # probes need no credentials


@pytest.mark.parametrize(("content", "message"), [
    ("basic_auth_users: {prom: plaintext}", b"not a bcrypt hash"),
    ("tls_server_config: {}", b"unsupported key"),
    (": : :", b"not valid YAML"),
])
def test_bad_web_config_exits_2(tmp_path: Path, content: str, message: bytes) -> None:
    config = tmp_path / "web.yml"
    config.write_text(content)
    result = subprocess.run(monitor_command("--emulate", "inf2.xlarge", "--prometheus-port", "0", "--web-config",
                                            str(config)), capture_output=True, env=subprocess_env(), timeout=30,
                            check=False)
    assert result.returncode == 2 and message in result.stderr


def test_port_in_use_exits_1() -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run(monitor_command("--emulate", "inf2.xlarge", "--prometheus-port", str(port),
                                                "--prometheus-address", "127.0.0.1"),
                                capture_output=True, env=subprocess_env(), timeout=30, check=False)
    assert result.returncode == 1
    assert b"prometheus exporter could not start" in result.stderr


def test_pipeline_serves_reports_skips_garbage_and_exits_at_eof() -> None:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "exporters.prometheus.pipeline", "--port", str(port),
                             "--address", "127.0.0.1"], stdin=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=subprocess_env())
    assert proc.stdin is not None
    daemon = subprocess.run(monitor_command("--once", "--emulate", "trn1.2xlarge", "-c", ALL_1S),
                            capture_output=True, env=subprocess_env(), timeout=60, check=True)
    report_line = daemon.stdout.splitlines()[0]
    for line in (b"not json", b'{"neuron_runtime_data": 5}', b"\xff\xfe", report_line, b""):
        proc.stdin.write(line + b"\n")
    proc.stdin.flush()
    wait_http(f"http://127.0.0.1:{port}/ready")
    status, _, body = get(f"http://127.0.0.1:{port}/metrics")
    assert status == 200 and b"neuroncore_utilization_ratio{" in body
    proc.stdin.close()
    proc.wait(10)
    assert proc.returncode == 0
    err = proc.stderr.read() if proc.stderr else b""
    assert err.count(b"skipped") == 3 and b"Traceback" not in err
    assert json.loads(report_line)["neuron_runtime_data"]
