#!/usr/bin/env python3
"""Time a SIGKILL: every few ms freeze the writer (SIGSTOP) and look at the newest log file of STORE; if it has
DATA records of at least MIN_CONNS (default 2) producer connections after its last UOW_END record (a log
unit of work batching several broker units of work is partly on disk), SIGKILL the frozen writer, so the
disk holds exactly what it had written at that instant; otherwise let it go on (SIGCONT).
Usage: tailwatch.py STORE PID TIMEOUT MIN_LOGS; exit 0 when killed that way, 1 on timeout (writer left running)."""
import os, re, signal, struct, sys, time
CONN = re.compile(rb'ID:[A-Za-z0-9.-]+-\d+-\d+-\d+:\d+')
store, pid, timeout, min_logs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
MIN_CONNS = int(os.environ.get('MIN_CONNS', '2'))

def after_last_uow_end():
    logs = sorted(n for n in os.listdir(store) if re.fullmatch(r"[0-9a-f]{16}\.log", n))
    if len(logs) < min_logs:
        return 0
    d = open(os.path.join(store, logs[-1]), "rb").read()
    off = 0; conns = set()
    while off + 10 <= len(d) and d[off] == 0x2A:
        kind = d[off + 1]; ln = struct.unpack(">I", d[off + 6:off + 10])[0]
        if kind == 0xFF:
            conns = set()
        elif kind == 5:
            m = CONN.search(d[off + 10:off + 10 + min(ln, 200)])
            if m: conns.add(m.group())
        off += 10 + ln
    return len(conns)

end = time.time() + timeout
while time.time() < end:
    time.sleep(0.003)
    if not os.path.isdir(store):
        continue
    os.kill(pid, signal.SIGSTOP)
    try:
        n = after_last_uow_end()
    except FileNotFoundError:
        n = 0
    if n >= MIN_CONNS:
        os.kill(pid, signal.SIGKILL)
        print(f"SIGKILL with messages of {n} producer connections in an unfinished unit of work on disk")
        sys.exit(0)
    os.kill(pid, signal.SIGCONT)
sys.exit(1)
