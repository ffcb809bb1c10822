#!/usr/bin/env python3
"""SIGKILL the writer while it snapshots its index: every ~1 ms freeze it (SIGSTOP) and look at STORE; when a
temp.index directory (a snapshot being copied, LevelDBClient.copyDirtyIndexToSnapshot) or two NNN.index
snapshots (renamed, the previous not yet deleted) are there, SIGKILL the frozen writer; else SIGCONT.
WHAT: cut (temp.index), left (two snapshots) or either (default).
Usage: snapwatch.py STORE PID TIMEOUT MIN_LOGS [WHAT]; exit 0 when killed so, 1 on timeout."""
import os, re, signal, sys, time
store, pid, timeout, min_logs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
what = sys.argv[5] if len(sys.argv) > 5 else "either"
SNAP = re.compile(r"[0-9a-f]{16}\.index")
end = time.time() + timeout
while time.time() < end:
    time.sleep(0.0005)
    if not os.path.isdir(store):
        continue
    os.kill(pid, signal.SIGSTOP)
    try:
        names = os.listdir(store)
    except FileNotFoundError:
        names = []
    logs = sum(1 for n in names if n.endswith(".log"))
    snaps = [n for n in names if SNAP.fullmatch(n)]
    tmp = "temp.index" in names
    hit = {"cut": tmp, "left": len(snaps) >= 2}.get(what, tmp or len(snaps) >= 2)
    if logs >= min_logs and hit:
        os.kill(pid, signal.SIGKILL)
        print(f"SIGKILL: temp.index={tmp} snapshots={snaps}", flush=True)
        sys.exit(0)
    os.kill(pid, signal.SIGCONT)
sys.exit(1)
