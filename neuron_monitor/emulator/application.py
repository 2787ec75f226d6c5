"""One emulated Neuron application: a real process that holds its devices open and uses CPU.

Started by the emulator with NEURON_PROCESS_TAG / NEURON_RT_VISIBLE_CORES in its
environment, as a real application would have.  It dies with the emulator: the kernel
sends it SIGKILL when its parent dies (PR_SET_PDEATHSIG), and it also exits when the
pipe from the emulator closes (a second line of defence, e.g. across a re-parenting).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import select
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
SLICE_S = 0.05


def die_with_parent(parent: int) -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the pipe watchdog still ends us
    if os.getppid() != parent:  # the parent died before prctl took effect
        sys.exit(0)


def burn(user_share: float, system_share: float, watchdog: int) -> None:
    """Use about `user_share` of a CPU in user mode and `system_share` in the kernel."""
    zero = os.open("/dev/zero", os.O_RDONLY)
    while True:
        start = time.monotonic()
        user_until = start + SLICE_S * min(1.0, user_share)
        x = 0
        while time.monotonic() < user_until:
            x += 1
        system_until = time.monotonic() + SLICE_S * min(1.0, system_share)
        while time.monotonic() < system_until:
            os.read(zero, 1 << 16)  # copying zeros is kernel time
        rest = SLICE_S - (time.monotonic() - start)
        ready, _, _ = select.select([watchdog], [], [], max(0.0, rest))
        if ready:  # EOF: the emulator is gone
            return


def main() -> None:
    parser = argparse.ArgumentParser(description="an emulated Neuron application (started by the emulator)")
    parser.add_argument("--device-file", action="append", default=[])
    parser.add_argument("--cpu-user", type=float, default=0.0, help="percent of one CPU")
    parser.add_argument("--cpu-system", type=float, default=0.0)
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--watchdog-fd", type=int, required=True)
    args = parser.parse_args()
    die_with_parent(args.parent)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    held = [os.open(path, os.O_RDONLY) for path in args.device_file]  # what makes us a Neuron application
    try:
        burn(args.cpu_user / 100.0, args.cpu_system / 100.0, args.watchdog_fd)
    finally:
        for fd in held:
            os.close(fd)


if __name__ == "__main__":
    main()
