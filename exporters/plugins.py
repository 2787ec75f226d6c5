"""The table of optional exporters the CLI can turn on.

Each entry names a module with two functions:

    add_arguments(parser: argparse.ArgumentParser) -> None
    build(args: argparse.Namespace, context: ExporterContext) -> Exporter | None

`build` returns None when the user did not ask for that exporter.  Modules are imported
by name so that, e.g., the CloudWatch plugin can import boto3 only inside `build` when it
is really used (boto3 costs tens of MB and hundreds of ms at start-up).
"""

from __future__ import annotations

import argparse
import importlib
from types import ModuleType
from typing import Protocol, cast

from exporters.base import Exporter, ExporterContext

PLUGIN_MODULES: tuple[str, ...] = (
    "exporters.prometheus.plugin",
    "exporters.cloudwatch.plugin",
)


class ExporterPlugin(Protocol):
    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def build(self, args: argparse.Namespace, context: ExporterContext) -> Exporter | None: ...


def load_plugins() -> list[ExporterPlugin]:
    modules: list[ModuleType] = [importlib.import_module(name) for name in PLUGIN_MODULES]
    return [cast(ExporterPlugin, module) for module in modules]
