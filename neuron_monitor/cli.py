"""`neuron-monitor`: the command line, compatible with the original tool's.

This is the only place that exits the process: library code raises typed errors, and
they become one line on stderr and an exit status here (2: bad usage or config, before
anything starts; 1: something could not start).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, NoReturn

from exporters.base import Exporter, ExporterContext
from exporters.plugins import ExporterPlugin, load_plugins
from exporters.stdout import StdoutExporter
from neuron_monitor import __version__
from neuron_monitor.backends.base import BackendUnavailable, DeviceBackend
from neuron_monitor.catalogue import INSTANCE_TYPES
from neuron_monitor.config import ConfigError, MonitorConfig, default_config, load_config
from neuron_monitor.daemon import Daemon, DaemonOptions, StartupError
from neuron_monitor.instance_identity import fetch_instance_info
from neuron_monitor.report import InstanceInfo

DEFAULT_EMULATED_TYPE = "trn2.48xlarge"
SYSFS_DEVICE_DIR = "devices/virtual/neuron_device"

LOG_LEVELS = {0: logging.CRITICAL + 10, 1: logging.ERROR, 2: logging.WARNING, 3: logging.INFO, 4: logging.DEBUG}


class UsageError(Exception):
    """Bad command line or config: exit 2 before anything starts."""


def _verbosity(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer 0-4, got {text!r}") from None
    if not 0 <= value <= 4:
        raise argparse.ArgumentTypeError(f"expected 0-4, got {value}")
    return value


def build_parser(plugins: Sequence[ExporterPlugin]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="neuron-monitor",
        description="Collect metrics from AWS Neuron devices and applications; one JSON report per line "
        "on stdout (and optionally Prometheus / CloudWatch).",
    )
    parser.add_argument("-c", "--config-file", metavar="PATH", default=os.environ.get("NEURON_MONITOR_CONFIG_FILE"),
                        help="JSON config file (default: $NEURON_MONITOR_CONFIG_FILE, else every metric group "
                        "every 5 s)")
    parser.add_argument("--verbose", type=_verbosity, default=0, metavar="N",
                        help="diagnostics on stderr: 0 (silent, default) to 4 (debug)")
    parser.add_argument("--backend", choices=("auto", "sysfs", "emulated"), default="auto",
                        help="device source: the Neuron driver's sysfs files, or emulated devices "
                        "(auto: sysfs when the driver is present; emulated when --emulate is given)")
    parser.add_argument("--emulate", metavar="INSTANCE_TYPE",
                        help=f"emulate the devices of an instance type ({', '.join(INSTANCE_TYPES)})")
    parser.add_argument("--seed", type=int, default=0, help="seed of the emulated devices (default 0)")
    parser.add_argument("--scenario", metavar="FILE", help="emulation scenario file (applications, load, faults)")
    parser.add_argument("--sysfs-path", default="/sys", metavar="DIR", help="where sysfs is mounted (default /sys)")
    parser.add_argument("--procfs-path", default="/proc", metavar="DIR",
                        help="where procfs is mounted (default /proc)")
    parser.add_argument("--devfs-path", default="/dev", metavar="DIR", help="where /dev is (default /dev)")
    parser.add_argument("--once", action="store_true", help="collect every configured group once, print one "
                        "report and exit")
    parser.add_argument("--version", action="version", version=f"neuron-monitor {__version__}")
    for plugin in plugins:
        plugin.add_arguments(parser)
    return parser


def choose_backend(args: argparse.Namespace) -> DeviceBackend:
    kind = args.backend
    if args.emulate and kind == "sysfs":
        raise UsageError("--emulate cannot be combined with --backend sysfs")
    if kind == "auto":
        if args.emulate:
            kind = "emulated"
        elif (Path(args.sysfs_path) / SYSFS_DEVICE_DIR).is_dir():
            kind = "sysfs"
        else:
            raise UsageError(
                f"no Neuron driver found ({Path(args.sysfs_path) / SYSFS_DEVICE_DIR} does not exist); "
                f"to try neuron-monitor without Neuron hardware, run it on emulated devices: "
                f"--emulate {DEFAULT_EMULATED_TYPE}"
            )
    if kind == "emulated":
        return _emulated_backend(args)
    return _sysfs_backend(args)


def _emulated_backend(args: argparse.Namespace) -> DeviceBackend:
    from neuron_monitor.backends.emulated import EmulatedBackend
    from neuron_monitor.backends.scenario import ScenarioError, load_scenario

    instance_type = args.emulate or DEFAULT_EMULATED_TYPE
    if instance_type not in INSTANCE_TYPES:
        raise UsageError(f"--emulate: unknown instance type {instance_type!r}; valid: {', '.join(INSTANCE_TYPES)}")
    scenario = None
    if args.scenario:
        try:
            scenario = load_scenario(args.scenario)
        except ScenarioError as exc:
            raise UsageError(str(exc)) from None
    try:
        return EmulatedBackend(instance_type, seed=args.seed, scenario=scenario)
    except ScenarioError as exc:  # the scenario does not fit the instance type
        where = f"{args.scenario}: " if args.scenario else ""
        raise UsageError(f"{where}{exc} (with --emulate {instance_type})") from None


def _sysfs_backend(args: argparse.Namespace) -> DeviceBackend:
    from neuron_monitor.backends.sysfs import SysfsBackend

    if args.scenario:
        raise UsageError("--scenario applies to emulated devices only")
    try:
        return SysfsBackend(args.sysfs_path, args.procfs_path, args.devfs_path)
    except BackendUnavailable as exc:
        raise UsageError(str(exc)) from None


def identity_source(args: argparse.Namespace) -> Callable[[], Awaitable[InstanceInfo]]:
    if args.emulate or args.backend == "emulated":
        from neuron_monitor.backends.emulated import emulated_identity

        info = emulated_identity(args.emulate or DEFAULT_EMULATED_TYPE, args.seed)

        async def fixed() -> InstanceInfo:
            return info

        return fixed
    return fetch_instance_info


def configure_logging(verbosity: int) -> None:
    logging.basicConfig(
        level=LOG_LEVELS[verbosity],
        stream=sys.stderr,
        format="%(asctime)s neuron-monitor %(levelname)s %(name)s: %(message)s",
    )


def _fail(message: str, status: int) -> NoReturn:
    print(f"neuron-monitor: error: {message}", file=sys.stderr)
    raise SystemExit(status)


def _run(coro: Coroutine[Any, Any, int]) -> int:
    try:
        import uvloop
    except ImportError:  # uvloop is optional (not on every platform)
        return asyncio.run(coro)
    return int(uvloop.run(coro))


def main(argv: Sequence[str] | None = None) -> NoReturn:
    plugins = load_plugins()
    parser = build_parser(plugins)
    args = parser.parse_args(argv)
    configure_logging(args.verbose)
    try:
        config: MonitorConfig = load_config(args.config_file) if args.config_file else default_config()
        backend = choose_backend(args)
    except (ConfigError, UsageError) as exc:
        _fail(str(exc), 2)

    def build_exporters(context: ExporterContext) -> list[Exporter]:
        exporters: list[Exporter] = [StdoutExporter(context)]
        for plugin in plugins:
            try:
                built = plugin.build(args, context)
            except ValueError as exc:  # a plugin's flags do not fit together
                raise UsageError(str(exc)) from None
            if built is not None:
                exporters.append(built)
        return exporters

    daemon = Daemon(backend, config, build_exporters, identity_source(args),
                    DaemonOptions(once=args.once, config_path=args.config_file))
    try:
        status = _run(daemon.run())
    except StartupError as exc:
        _fail(str(exc), 1)
    except UsageError as exc:
        _fail(str(exc), 2)
    raise SystemExit(status)


if __name__ == "__main__":
    main()
