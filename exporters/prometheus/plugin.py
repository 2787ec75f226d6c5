"""`--prometheus-port` and friends on the daemon's command line."""

from __future__ import annotations

import argparse

from exporters.base import Exporter, ExporterContext
from exporters.prometheus.options import basic_auth, port_number, tls_files


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("Prometheus endpoint")
    group.add_argument("--prometheus-port", type=port_number, metavar="PORT",
                       help="serve /metrics, /healthz and /ready on this port (off by default; the original "
                       "companion exporter used 8000)")
    group.add_argument("--prometheus-address", default="", metavar="ADDR",
                       help="address to listen on (default: every interface)")
    group.add_argument("--cert-file", "--prometheus-cert-file", dest="prometheus_cert_file", metavar="PATH",
                       help="serve HTTPS with this certificate (PEM); reloaded when it changes")
    group.add_argument("--key-file", "--prometheus-key-file", dest="prometheus_key_file", metavar="PATH",
                       help="private key of --cert-file (PEM)")
    group.add_argument("--web-config", "--prometheus-web-config", dest="prometheus_web_config", metavar="PATH",
                       help="YAML with basic_auth_users: {user: bcrypt-hash} to require basic auth on /metrics")


def build(args: argparse.Namespace, context: ExporterContext) -> Exporter | None:
    tls = tls_files(args.prometheus_cert_file, args.prometheus_key_file)
    auth = basic_auth(args.prometheus_web_config)
    if args.prometheus_port is None:
        if tls or auth:
            raise ValueError("--cert-file/--key-file/--web-config need --prometheus-port")
        return None
    from exporters.prometheus.exporter import PrometheusExporter

    return PrometheusExporter(context, args.prometheus_address, args.prometheus_port, tls, auth)
