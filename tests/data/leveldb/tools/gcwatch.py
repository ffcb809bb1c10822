#!/usr/bin/env python3
"""SIGKILL the writer while its log GC deletes files: every ~0.5 ms freeze it (SIGSTOP) and list STORE's log
files; as soon as one seen before is gone (LevelDBClient.gc deletes the unreferenced logs below the last
snapshot one by one), SIGKILL the frozen writer; else SIGCONT. Prints the files seen and deleted as JSON.
Usage: gcwatch.py STORE PID TIMEOUT; exit 0 when killed so, 1 on timeout."""
import json, os, re, signal, sys, time
store, pid, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
LOG = re.compile(r"[0-9a-f]{16}\.log")
seen = set()
end = time.time() + timeout
while time.time() < end:
    time.sleep(0.0005)
    if not os.path.isdir(store):
        continue
    os.kill(pid, signal.SIGSTOP)
    try:
        now = {n for n in os.listdir(store) if LOG.fullmatch(n)}
    except FileNotFoundError:
        now = set()
    gone = seen - now
    if gone:
        os.kill(pid, signal.SIGKILL)
        print(json.dumps({"logsSeen": sorted(seen | now), "deletedBeforeKill": sorted(gone)}))
        sys.exit(0)
    seen |= now
    os.kill(pid, signal.SIGCONT)
sys.exit(1)
