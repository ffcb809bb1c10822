"""The driver JVM's process group (amqtool/engines/export/spark.py, DriverJvm): when the session ends, every
process of the group is killed, including one that joins it while the kill is under way (the race that let
~1 driver JVM in 55 of tests/cli/test_export_spark_kill.py's trials outlive amqtool under init)."""
from __future__ import annotations

import os
import subprocess
import threading
import time

from amqtool.engines.export.spark import DriverJvm


def _group(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is ``pgid``."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != b"Z":
            out.append(int(p))
    return out


def test_every_member_is_killed_and_the_watchdog_gone():
    drv = DriverJvm()
    members = [subprocess.Popen(["sleep", "300"], process_group=drv.pgid),
               subprocess.Popen(["sh", "-c", "sleep 300; sleep 300"], process_group=drv.pgid)]
    assert set(_group(drv.pgid)) >= {m.pid for m in members}
    drv.kill()
    assert [m.wait(timeout=10) for m in members] == [-9, -9]
    assert drv.watchdog.returncode is not None
    assert _group(drv.pgid) == []


def test_a_process_joining_while_the_group_is_killed_is_killed_too():
    drv = DriverJvm()
    first = subprocess.Popen(["sleep", "300"], process_group=drv.pgid)
    joined: list[subprocess.Popen] = []
    until = time.monotonic() + 0.3

    def keep_joining():  # what a JVM forked just before the kill does: setpgid into the group just after it
        while time.monotonic() < until:
            try:
                joined.append(subprocess.Popen(["sleep", "300"], process_group=drv.pgid))
            except (PermissionError, ProcessLookupError, OSError):  # the group is gone: nothing can join it
                return
            time.sleep(0.005)

    t = threading.Thread(target=keep_joining)
    t.start()
    time.sleep(0.05)
    drv.kill()  # under way while processes still join, for a quarter of a second
    t.join()
    try:
        assert first.wait(timeout=10) == -9
        assert joined, "no process joined the group before the kill"
        time.sleep(0.2)
        alive = [p.pid for p in joined if p.poll() is None]
        assert alive == [], f"{len(alive)} of {len(joined)} joiners outlived the kill"
    finally:
        for p in [first, *joined]:
            if p.poll() is None:
                p.kill()
            p.wait()
