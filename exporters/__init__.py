"""Exporters: where finished reports go (stdout JSON, Prometheus, CloudWatch)."""
