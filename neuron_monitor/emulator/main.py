"""`neuron-monitor-emulator`: run the simulation as a Neuron driver under a folder.

    neuron-monitor-emulator --instance-type trn1.32xlarge --root /tmp/neuron [--seed N]
                            [--scenario FILE] [--tick 100ms] [--cpu-scale 0.1] [--duration 10m]

keeps ROOT/sys/devices/virtual/neuron_device/..., ROOT/sys/class/neuron_device/ and
ROOT/dev/neuron<N> up to date and runs one real process per emulated application.  Then:

    neuron-monitor --backend sysfs --sysfs-path ROOT/sys --procfs-path /proc --devfs-path ROOT/dev

ROOT/emulator.json is written once the tree exists (and rewritten when applications start
or stop): the applications' pids, tags and cores, for tests and curious users.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from neuron_monitor.backends.scenario import Scenario, ScenarioError, format_core_list, load_scenario
from neuron_monitor.backends.simulation import AppState, Simulation
from neuron_monitor.catalogue import INSTANCE_TYPES, instance_type
from neuron_monitor.durations import DurationError, parse_duration
from neuron_monitor.emulator.tree_writer import TreeWriter

log = logging.getLogger("neuron-monitor-emulator")


class Emulator:
    def __init__(self, sim: Simulation, root: str, cpu_scale: float) -> None:
        self.sim = sim
        self.root = root
        self.cpu_scale = cpu_scale
        self.writer = TreeWriter(root, sim)
        self.children: dict[int, subprocess.Popen[bytes]] = {}  # app index -> process
        self.exited: set[int] = set()  # applications whose process died: like a crash, it stays dead
        self._watchdog_r, self._watchdog_w = os.pipe()
        os.set_inheritable(self._watchdog_r, True)

    def _spawn(self, app: AppState) -> None:
        per_device = self.sim.arch.physical_cores_per_device // self.sim.lnc
        devices = sorted({c // per_device for c in app.cores})
        env = dict(os.environ)
        env.pop("NEURON_PROCESS_TAG", None)
        if app.tag is not None:
            env["NEURON_PROCESS_TAG"] = app.tag
        env["NEURON_RT_VISIBLE_CORES"] = format_core_list(app.cores)
        cmd = [sys.executable, "-m", "neuron_monitor.emulator.application", "--parent", str(os.getpid()),
               "--watchdog-fd", str(self._watchdog_r),
               "--cpu-user", str(app.spec.cpu.user * self.cpu_scale),
               "--cpu-system", str(app.spec.cpu.system * self.cpu_scale)]
        for d in devices:
            cmd += ["--device-file", os.path.join(self.writer.dev_dir, f"neuron{d}")]
        # Our own interpreter and module, arguments built from validated numbers and paths.
        proc = subprocess.Popen(cmd, env=env, pass_fds=(self._watchdog_r,), stdin=subprocess.DEVNULL)  # noqa: S603
        self.children[app.index] = proc
        app.pid = proc.pid

    def sync_children(self) -> bool:
        """Start and stop processes to match the simulation's running applications."""
        changed = False
        for app in self.sim.apps:
            proc = self.children.get(app.index)
            if proc is not None and proc.poll() is not None and app.index not in self.exited:
                self.exited.add(app.index)
                changed = True
            if app.running and proc is None:
                self._spawn(app)
                changed = True
            elif not app.running and proc is not None:
                self._stop(app.index)
                self.exited.discard(app.index)
                changed = True
        return changed

    def _stop(self, index: int) -> None:
        proc = self.children.pop(index)
        proc.terminate()
        try:
            proc.wait(2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def write_manifest(self) -> None:
        data = {"instance_type": self.sim.instance.name, "pid": os.getpid(), "applications": [
            {"pid": app.pid, "tag": app.effective_tag, "cores": list(app.cores),
             "cpu_user": app.spec.cpu.user * self.cpu_scale, "cpu_system": app.spec.cpu.system * self.cpu_scale}
            for app in self.sim.apps if app.running and app.index not in self.exited]}
        tmp = Path(self.root) / "emulator.json.tmp"
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(Path(self.root) / "emulator.json")

    def run(self, tick: float, duration: float | None, stop: list[bool]) -> None:
        self.sim.advance_to(time.monotonic())
        self.writer.create()  # device nodes first: the applications open them at start
        self.sync_children()
        self.write_manifest()
        started = time.monotonic()
        next_tick = started
        while not stop:
            next_tick += tick
            delay = next_tick - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            self.sim.advance_to(time.monotonic())
            if self.sync_children():
                self.write_manifest()
            self.writer.update()
            if duration is not None and time.monotonic() - started >= duration:
                break

    def shutdown(self) -> None:
        for index in list(self.children):
            self._stop(index)
        os.close(self._watchdog_w)
        self.writer.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="neuron-monitor-emulator",
                                     description="Play emulated Neuron devices as a driver's sysfs tree.")
    parser.add_argument("--instance-type", required=True, choices=list(INSTANCE_TYPES), metavar="TYPE")
    parser.add_argument("--root", required=True, help="folder to create sys/ and dev/ under")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scenario", help="scenario file (see configs/scenarios/)")
    parser.add_argument("--tick", default="100ms", help="how often the files are updated (default 100ms)")
    parser.add_argument("--cpu-scale", type=float, default=1.0,
                        help="scale the applications' CPU use (e.g. 0.1 on a small machine)")
    parser.add_argument("--duration", help="stop after this long (default: run until signalled)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr)
    try:
        tick = parse_duration(args.tick)
        duration = parse_duration(args.duration) if args.duration else None
        scenario = load_scenario(args.scenario) if args.scenario else Scenario()
        sim = Simulation(instance_type(args.instance_type), scenario, args.seed, time.monotonic())
    except (DurationError, ScenarioError) as exc:
        print(f"neuron-monitor-emulator: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    stop: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    signal.signal(signal.SIGINT, lambda *_: stop.append(True))
    emulator = Emulator(sim, args.root, args.cpu_scale)
    try:
        emulator.run(tick, duration, stop)
    finally:
        emulator.shutdown()


if __name__ == "__main__":
    main()
