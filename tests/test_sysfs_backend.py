"""The sysfs backend on captured driver trees, fake procfs trees and broken files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from neuron_monitor.backends.base import REPORTED_CORE_MEMORY, REPORTED_HOST_MEMORY, BackendUnavailable, Need
from neuron_monitor.backends.sysfs import SysfsBackend
from neuron_monitor.backends.sysfs.files import FileCache, ReadError, parse_counter
from neuron_monitor.backends.sysfs.procfs import ProcessScanner

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "sysfs"
ALL = frozenset(Need)
EXPECTED_HW = {
    "inf1": ("inferentia", "v1", 4, None, 8 * 1024**3),
    "inf2": ("inferentia2", "v2", 2, None, 32 * 1024**3),
    "trn1": ("trainium", "v2", 2, None, 32 * 1024**3),
    "trn2": ("trainium2", "v3d", 8, 2, 96 * 1024**3),
}


@pytest.fixture
def tree(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """A writable copy of a captured tree."""
    family = getattr(request, "param", "trn1")
    target = tmp_path / family
    shutil.copytree(FIXTURES / family, target, symlinks=True)
    return target


def backend_for(root: Path, procfs: Path | None = None) -> SysfsBackend:
    empty_proc = root / "proc"
    empty_proc.mkdir(exist_ok=True)
    return SysfsBackend(str(root / "sys"), str(procfs or empty_proc), str(root / "dev"))


@pytest.mark.parametrize("family", sorted(EXPECTED_HW))
def test_captured_trees_parse_to_the_simulated_numbers(family: str) -> None:
    root = FIXTURES / family
    expected = json.loads((root / "expected.json").read_text())
    backend = SysfsBackend(str(root / "sys"), "/nonexistent-proc", str(root / "dev"))
    hw = backend.hardware()
    assert (hw.device_type, hw.core_version, hw.physical_cores_per_device, hw.logical_core_config,
            hw.device_memory_size) == EXPECTED_HW[family]
    assert hw.device_count == 1 and hw.error == ""
    snap = backend.snapshot(frozenset({Need.CORES, Need.CORE_MEMORY, Need.DEVICES}), 0.0)
    assert snap.cores is not None and snap.devices is not None
    for index, want in expected["cores"].items():
        core = snap.cores[int(index)]
        assert core.error == ""
        assert (core.busy_us, core.flops) == (want["busy_us"], want["flops"])
        assert dict(core.status) == want["status"]
        # Only the categories the report has are read.
        assert dict(core.device_memory) == {k: want["device_memory"][k] for k in REPORTED_CORE_MEMORY}
    device = snap.devices[0]
    ecc = expected["ecc"]
    if family == "inf1":  # inf1 has no stats/hardware
        assert device.mem_ecc_uncorrected == 0
    else:
        assert (device.mem_ecc_uncorrected, device.sram_ecc_uncorrected, device.mem_ecc_repairable_uncorrected) == (
            ecc["mem_ecc_uncorrected"], ecc["sram_ecc_uncorrected"], ecc["mem_ecc_repairable_uncorrected"])
        assert ecc["mem_ecc_uncorrected"] > 0
    assert device.mem_ecc_corrected == 0 and device.sram_ecc_corrected == 0  # the driver has no such counter
    assert dict(device.host_memory) == {k: expected["host_memory"][k] for k in REPORTED_HOST_MEMORY}
    backend.close()


def test_no_driver_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(BackendUnavailable, match="--emulate"):
        SysfsBackend(str(tmp_path), "/proc", "/dev")


@pytest.mark.parametrize("content", [b"", b"garbage\n", b"-5\n", b"12abc\n", b"\xff\xfe\n", b"   \n"])
def test_garbage_counter_becomes_that_cores_error(tree: Path, content: bytes) -> None:
    backend = backend_for(tree)
    core0 = tree / "sys/devices/virtual/neuron_device/neuron0/neuron_core0/stats/other_info/nc_time_in_use/total"
    core0.write_bytes(content)
    snap = backend.snapshot(ALL, 0.0)
    assert snap.cores is not None
    assert "nc_time_in_use/total" in snap.cores[0].error
    assert snap.cores[1].error == ""  # the other core is read as usual


def test_missing_and_unreadable_files(tree: Path) -> None:
    status = tree / "sys/devices/virtual/neuron_device/neuron0/neuron_core1/stats/status/success/total"
    status.unlink()
    hardware = tree / "sys/devices/virtual/neuron_device/neuron0/stats/hardware/mem_ecc_uncorrected"
    hardware.unlink()
    hardware.mkdir()  # not a file any more
    backend = backend_for(tree)
    snap = backend.snapshot(ALL, 1.0)
    assert snap.cores is not None and snap.devices is not None
    assert "success/total" in snap.cores[1].error
    assert snap.devices[0].error


def test_counter_rewritten_in_place_is_seen_and_a_backwards_counter_is_reported(tree: Path) -> None:
    backend = backend_for(tree)
    path = tree / "sys/devices/virtual/neuron_device/neuron0/neuron_core0/stats/other_info/flop_count/total"
    first = backend.snapshot(ALL, 0.0).cores
    assert first is not None
    with open(path, "r+b") as fh:  # in place, as the driver (and the emulator) do
        fh.write(b"7\n")
        fh.truncate()
    second = backend.snapshot(ALL, 1.0).cores
    assert second is not None and second[0].flops == 7 < first[0].flops


def test_a_device_folder_that_vanishes_and_comes_back(tree: Path) -> None:
    backend = backend_for(tree)
    assert backend.snapshot(ALL, 0.0).cores
    saved = tree / "saved-neuron0"
    device = tree / "sys/devices/virtual/neuron_device/neuron0"
    device.rename(saved)
    snap = backend.snapshot(ALL, 1.0)
    assert snap.cores == {} and backend.hardware().device_count == 0
    saved.rename(device)
    snap = backend.snapshot(ALL, 2.0)
    assert snap.cores is not None and len(snap.cores) == 2 and backend.hardware().device_count == 1


def test_file_cache_reopens_replaced_files(tmp_path: Path) -> None:
    cache = FileCache()
    path = tmp_path / "total"
    path.write_text("5\n")
    assert cache.read_counter(str(path)) == 5
    cache.forget_under(str(tmp_path) + os.sep)  # what the backend does when a device goes away
    path.unlink()
    with pytest.raises(ReadError, match="No such file"):
        cache.read_counter(str(path))
    path.write_text("9\n")
    assert cache.read_counter(str(path)) == 9
    assert parse_counter(b"42\nstale tail", "x") == 42  # what a reader may see mid-rewrite
    cache.close()


def make_process(proc: Path, dev: Path, pid: int, devices: list[int], environ: dict[str, str] | None,
                 utime: int = 250, stime: int = 50) -> None:
    """A fake /proc/PID: fd links to device nodes, environ, stat."""
    base = proc / str(pid)
    (base / "fd").mkdir(parents=True)
    os.symlink("/dev/null", base / "fd" / "0")
    for i, d in enumerate(devices):
        os.symlink(str(dev / f"neuron{d}"), base / "fd" / str(10 + i))
    if environ is None:
        (base / "environ").mkdir()  # cannot be read as a file
    else:
        (base / "environ").write_bytes(b"\0".join(f"{k}={v}".encode() for k, v in environ.items()) + b"\0")
    (base / "stat").write_text(f"{pid} (python3 (x) y) S 1 1 1 0 -1 0 0 0 0 0 {utime} {stime} 0 0 20 0 1 0\n")


def test_applications_from_a_procfs_tree(tree: Path, tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    dev = tree / "dev"
    make_process(proc, dev, 100, [0], {"NEURON_PROCESS_TAG": "trainer", "NEURON_RT_VISIBLE_CORES": "1"})
    make_process(proc, dev, 200, [0], {"HOME": "/root"})  # untagged: all cores of its device
    make_process(proc, dev, 300, [], {"NEURON_PROCESS_TAG": "not-neuron"})
    make_process(proc, dev, 400, [0], None)  # environment unreadable
    make_process(proc, dev, 500, [0], {"NEURON_RT_VISIBLE_CORES": "zz"})
    (proc / "self").mkdir()
    backend = backend_for(tree, proc)
    apps = backend.snapshot(ALL, 0.0).applications
    assert apps is not None
    by_pid = {a.pid: a for a in apps}
    assert sorted(by_pid) == [100, 200, 400, 500]
    assert (by_pid[100].tag, by_pid[100].cores) == ("trainer", (1,))
    assert (by_pid[200].tag, by_pid[200].cores) == ("200", (0, 1))
    assert by_pid[200].cpu_user_s == pytest.approx(250 / os.sysconf("SC_CLK_TCK"))
    assert by_pid[400].error.startswith("cannot read") and by_pid[400].tag == "400"
    assert "NEURON_RT_VISIBLE_CORES" in by_pid[500].error
    host_total = sum(sum(a.host_memory.values()) for a in apps if a.host_memory)
    assert host_total > 0  # the device's host memory shared among its holders
    assert all(a.latency is None and a.models is None for a in apps)
    shutil.rmtree(proc / "200")  # the process exits
    apps = backend.snapshot(ALL, 1.0).applications
    assert apps is not None and 200 not in {a.pid for a in apps}


def test_processes_of_other_users_are_counted_not_crashed_on(tree: Path) -> None:
    """A real process holds a device node; an unprivileged scanner cannot see its fds.

    As root, the scanning process drops to `nobody` (after its imports: the interpreter's
    files may be unreadable to nobody); as a normal user it already is unprivileged.
    """
    holder = subprocess.Popen([sys.executable, "-c", "import sys,time; f=open(sys.argv[1]); time.sleep(30)",
                               str(tree / "dev" / "neuron0")])
    try:
        code = (
            "import os,sys;"
            "from neuron_monitor.backends.sysfs.procfs import ProcessScanner as S;"
            "os.geteuid() == 0 and (os.setgid(65534), os.setuid(65534));"
            f"s=S('/proc', {str(tree / 'dev')!r}); found=s.scan();"
            f"print(len([p for p in found if p.pid=={holder.pid}]), s.uninspectable)"
        )
        env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
        time.sleep(0.3)  # let the holder open its device
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, check=True, timeout=30)
        seen, uninspectable = map(int, out.stdout.split())
        assert seen == 0 and uninspectable >= 1
        assert b"could not be inspected" in out.stderr or out.stderr == b""
        scanner = ProcessScanner("/proc", str(tree / "dev"))  # with our own privileges it is found
        assert holder.pid in {p.pid for p in scanner.scan()}
    finally:
        holder.kill()
        holder.wait()


def test_scanner_confirms_known_applications_cheaply_and_notices_changes(tree: Path, tmp_path: Path) -> None:
    """Known applications are confirmed by their stat (start time) each scan; their fds and
    environment are looked at again only every recheck_s; a reused PID is a new process."""
    proc = tmp_path / "proc"
    dev = tree / "dev"
    make_process(proc, dev, 100, [0], {"NEURON_PROCESS_TAG": "first"})
    stat = proc / "100" / "stat"
    stat.write_text("100 (app) S 1 1 1 0 -1 0 0 0 0 0 10 5 0 0 20 0 1 0 777 0\n")
    now = [0.0]
    scanner = ProcessScanner(str(proc), str(dev), recheck_s=10.0, clock=lambda: now[0])
    [app] = scanner.scan()
    assert (app.tag, app.cpu_user_s) == ("first", 10 / os.sysconf("SC_CLK_TCK"))

    # CPU time moves; the environment changes on disk but is not re-read within recheck_s
    stat.write_text("100 (app) S 1 1 1 0 -1 0 0 0 0 0 30 5 0 0 20 0 1 0 777 0\n")
    (proc / "100" / "environ").write_bytes(b"NEURON_PROCESS_TAG=changed\0")
    now[0] = 5.0
    [app] = scanner.scan()
    assert (app.tag, app.cpu_user_s) == ("first", 30 / os.sysconf("SC_CLK_TCK"))

    # the PID is reused by another process (another start time): inspected afresh at once
    stat.write_text("100 (other) S 1 1 1 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 999 0\n")
    now[0] = 6.0
    [app] = scanner.scan()
    assert app.tag == "changed"

    # it closes its device but keeps running: gone from the list after recheck_s
    for link in (proc / "100" / "fd").iterdir():
        if "neuron" in os.readlink(link):
            link.unlink()
    now[0] = 15.0
    assert [a.pid for a in scanner.scan()] == [100]
    now[0] = 16.5
    assert scanner.scan() == []

    # it exits: nothing is remembered of it
    shutil.rmtree(proc / "100")
    now[0] = 30.0
    assert scanner.scan() == [] and not scanner._known


def test_scanner_reads_only_new_descriptors_of_large_processes(tree: Path, tmp_path: Path) -> None:
    """A process with hundreds of descriptors is not readlinked in full every recheck: only
    descriptor numbers that are new since the last look, and all of them every
    full_recheck_s (a device opened under a reused number is noticed then)."""
    proc = tmp_path / "proc"
    dev = tree / "dev"
    make_process(proc, dev, 700, [], {"HOME": "/"})
    fd_dir = proc / "700" / "fd"
    for n in range(100, 400):
        os.symlink(f"/var/lib/data/{n}", fd_dir / str(n))
    now = [0.0]
    scanner = ProcessScanner(str(proc), str(dev), recheck_s=10.0, full_recheck_s=60.0, clock=lambda: now[0])
    assert scanner.scan() == [] and scanner.links_read == 301
    # a device opened under a new descriptor number: noticed at the next recheck, reading 1 link
    os.symlink(str(dev / "neuron0"), fd_dir / "500")
    now[0] = 10.0
    before = scanner.links_read
    [app] = scanner.scan()
    assert app.devices == (0,) and scanner.links_read - before < 302 + 5  # one new link, then the full list once
    # it closes it again; later a device comes under a *reused* number (fd 150)
    (fd_dir / "500").unlink()
    now[0] = 20.0
    assert scanner.scan() == []
    (fd_dir / "150").unlink()
    os.symlink(str(dev / "neuron0"), fd_dir / "150")
    seen_at = None
    for t in range(30, 100, 10):
        now[0] = float(t)
        before = scanner.links_read
        apps = scanner.scan()
        if apps:
            seen_at = t
            break
        assert scanner.links_read - before <= 1  # incremental looks read next to nothing
    assert seen_at is not None and seen_at <= 20 + 60 + 10
