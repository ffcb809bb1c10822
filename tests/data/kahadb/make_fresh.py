#!/usr/bin/env python3
"""Fresh KahaDB stores from a real ActiveMQ 5.17.2 broker, unlike the shared fixtures.

usage: make_fresh.py [name ...]   (default: all)   ->  /work/kahadb-fresh/<name>/{kahadb|mkahadb, manifest.json, broker.log}

Reuses make_fixtures.py (Run, consume, send bookkeeping) with other seeds, counts, body sizes,
journal file sizes and scenarios.  Broker on 127.0.0.1:61755 (STOMP only), stopped by PID.
"""
import os, re, shutil, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TMPDIR", "/tmp/kahafresh-tmp")
os.makedirs(os.environ["TMPDIR"], exist_ok=True)
import make_fixtures as mf  # noqa: E402
from stompfx import Stomp  # noqa: E402

TOOLS = mf.TOOLS
mf.OUTROOT = os.path.dirname(TOOLS)
mf.WORK = os.path.join(os.environ["TMPDIR"], "amq-fx")
mf.PORT = 61755
PORT = mf.PORT
BASE_XML = open(os.path.join(TOOLS, "broker-basic.xml")).read()


def isolate(port, work, outroot, *modules):
    """Point this module, make_fixtures and ``modules`` (each with its own ``PORT``) at a copy of the fixture
    tools under $TMPDIR (broker configs are written there, never into the shared fixtures), the STOMP port
    ``port`` on 127.0.0.1, the work directory $TMPDIR/``work`` and the output root ``outroot``."""
    global TOOLS, PORT
    tools = os.path.join(os.environ["TMPDIR"], "tools")
    shutil.rmtree(tools, ignore_errors=True)
    shutil.copytree(mf.TOOLS, tools)
    TOOLS = mf.TOOLS = tools
    PORT = mf.PORT = port
    for m in modules:
        m.PORT = port
    mf.WORK = os.path.join(os.environ["TMPDIR"], work)
    mf.OUTROOT = outroot
    return tools


def settle(p, tx, commit, ids, live, txs):
    """commit or abort ``tx`` on connection ``p``; a commit makes its sends ``ids`` ((key, fx_id)) live; the
    outcome is noted in ``txs``"""
    (p.commit if commit else p.abort)(tx)
    if commit:
        for d, f in ids:
            live.add(d, f)
    txs.append({"transaction": tx, "outcome": "commit" if commit else "abort", "fx_ids": [f for _, f in ids]})


def config(name, adapter_xml):
    """a broker config like broker-basic.xml whose <persistenceAdapter> body is adapter_xml"""
    xml = re.sub(r"<persistenceAdapter>.*?</persistenceAdapter>",
                 "<persistenceAdapter>\n" + adapter_xml + "\n    </persistenceAdapter>", BASE_XML, flags=re.S)
    path = os.path.join(TOOLS, "broker-%s.xml" % name)
    with open(path, "w") as fh:
        fh.write(xml)
    return os.path.basename(path)


def kaha(length, extra=""):
    return ('<kahaDB directory="${fx.data}/kahadb" journalMaxFileLength="%d" checksumJournalFiles="true" '
            'checkForCorruptJournalFiles="true" %s/>' % (length, extra))


class Live:
    """what each queue / durable sub still holds, by fx_id, in send order"""

    def __init__(self, run):
        self.run = run
        self.q = {}

    def add(self, key, fx):
        self.q.setdefault(key, []).append(fx)

    def consume(self, dest, pred, client_id=None, durable=None, tx=None, commit=True, key=None):
        key = key or dest
        n = len(self.q.get(key, []))
        if n == 0:
            return []
        acked = mf.consume(self.run, dest, n, pred, client_id=client_id, durable=durable, tx=tx, commit=commit)
        if tx is None or commit:
            s = set(acked)
            self.q[key] = [f for f in self.q[key] if f not in s]
            return acked
        return []


def subscribe_durable(run, topic, cid, sub):
    c = Stomp(PORT, client_id=cid)
    c.subscribe(topic, "d1", durable_name=sub)
    c.disconnect()
    run.ev("durable_subscribed", client_id=cid, subscription=sub, destination=topic)


def finish(run, live, store="kahadb", **extra):
    for m in run.msgs:
        keys = [k for k, v in live.q.items() if m["fx_id"] in v]
        m["live_in"] = keys
        m["live"] = bool(keys)
    extra.setdefault("destinations", {k: {"live": len(v), "live_fx_ids": v} for k, v in live.q.items()})
    return run.finish(store, extra)


# ------------------------------------------------------------------ stores
def f1_small_files():
    """32 KiB journal files (many files), 3 queues + topic with 2 durable subs, acks interleaved in rounds"""
    run = mf.Run("f1-small-files", 7101)
    cfg = config("f1", kaha(32768))
    b = run.broker(cfg); b.start()
    T = "/topic/fx.f1.ev"
    subscribe_durable(run, T, "f1-a", "sa"); subscribe_durable(run, T, "f1-b", "sb")
    live = Live(run)
    seq = {}
    dests = ["/queue/fx.f1.a", "/queue/fx.f1.b", "/queue/fx.f1.c", T]
    for rnd in range(4):
        p = Stomp(PORT)
        for _ in range(60):
            d = run.rng.choice(dests)
            seq[d] = seq.get(d, 0) + 1
            m = run.send(p, d, seq[d], size=mf.log_uniform_size(run.rng, 10, 6000))
            if d == T:
                live.add("sa", m["fx_id"]); live.add("sb", m["fx_id"])
            else:
                live.add(d, m["fx_id"])
        p.disconnect()
        live.consume("/queue/fx.f1.a", lambda r, k=rnd: (r["seq"] + k) % 3 == 0)
        live.consume("/queue/fx.f1.b", lambda r: r["seq"] % 2 == 1)
        if rnd % 2 == 1:
            live.consume(T, lambda r: r["seq"] % 4 != 0, client_id="f1-a", durable="sa", key="sa")
    live.consume(T, lambda r: r["seq"] <= 20, client_id="f1-b", durable="sb", key="sb")
    b.stop(); run.broker_timings.append(b.timings)
    return finish(run, live, broker_config="tools/" + cfg,
                  scenario="4 rounds of 60 sends over 3 queues + a topic (2 durable subs); after each round "
                           "queues a,b consume and ack a subset; sub sa acks on odd rounds; sb once at the end.")


def f2_big_bodies():
    """bodies 20-90 KiB in 128 KiB files: most records span a large part of a file"""
    run = mf.Run("f2-big-bodies", 7102)
    cfg = config("f2", kaha(131072))
    b = run.broker(cfg); b.start()
    live = Live(run)
    Q, R = "/queue/fx.f2.big", "/queue/fx.f2.mix"
    p = Stomp(PORT)
    for i in range(1, 31):
        live.add(Q, run.send(p, Q, i, size=run.rng.randint(20000, 90000))["fx_id"])
        if i % 3 == 0:
            live.add(R, run.send(p, R, i // 3, size=run.rng.randint(10, 300))["fx_id"])
    p.disconnect()
    live.consume(Q, lambda r: r["seq"] % 4 in (1, 2))
    live.consume(R, lambda r: r["seq"] % 2 == 0)
    b.stop(); run.broker_timings.append(b.timings)
    return finish(run, live, broker_config="tools/" + cfg,
                  scenario="30 sends of 20-90 KB to fx.f2.big, 10 small to fx.f2.mix; half acked.")


def f3_tx():
    """many STOMP transactions (send and ack), committed and aborted, interleaved with plain traffic"""
    run = mf.Run("f3-tx", 7103)
    cfg = config("f3", kaha(32768))
    b = run.broker(cfg); b.start()
    live = Live(run)
    A, B = "/queue/fx.f3.a", "/queue/fx.f3.b"
    seq = {A: 0, B: 0}
    p = Stomp(PORT)
    txs = []
    for t in range(1, 13):
        tx = "f3-tx-%d" % t
        commit = run.rng.random() < 0.6
        p.begin(tx)
        ids = []
        for _ in range(run.rng.randint(2, 9)):
            d = run.rng.choice((A, B))
            seq[d] += 1
            ids.append((d, run.send(p, d, seq[d], tx=tx, size=mf.log_uniform_size(run.rng, 10, 8000))["fx_id"]))
        for _ in range(run.rng.randint(0, 4)):
            d = run.rng.choice((A, B))
            seq[d] += 1
            live.add(d, run.send(p, d, seq[d])["fx_id"])
        settle(p, tx, commit, ids, live, txs)
        if t % 4 == 0:
            p.disconnect()
            live.consume(A, lambda r: r["seq"] % 3 == 0, tx="f3-ack-c%d" % t, commit=True)
            live.consume(B, lambda r: True, tx="f3-ack-a%d" % t, commit=False)
            live.consume(B, lambda r: r["seq"] % 5 == 1)
            p = Stomp(PORT)
    p.disconnect()
    b.stop(); run.broker_timings.append(b.timings)
    return finish(run, live, broker_config="tools/" + cfg, transactions=txs,
                  scenario="12 send-transactions (random commit/abort) with plain sends inside their span; every "
                           "4th tx: a committed ack-tx on A, an aborted ack-tx on B, plain acks on B.")


def f4_gc():
    """journal GC with 32 KiB files and several GC passes between waves of traffic"""
    run = mf.Run("f4-gc", 7104)
    cfg = config("f4", kaha(32768, 'checkpointInterval="500" cleanupInterval="1000"'))
    b = run.broker(cfg); b.start()
    live = Live(run)
    Q, K = "/queue/fx.f4.q", "/queue/fx.f4.keep"
    kdir = os.path.join(run.work, "kahadb")
    seq = {Q: 0, K: 0}
    for wave in range(3):
        p = Stomp(PORT)
        for _ in range(70):
            d = Q if run.rng.random() < 0.85 else K
            seq[d] += 1
            live.add(d, run.send(p, d, seq[d], size=run.rng.randint(300, 2500))["fx_id"])
        p.disconnect()
        live.consume(Q, lambda r, w=wave: w == 2 and r["seq"] % 9 == 0 or w < 2)
        time.sleep(3.0)
        run.ev("after_gc_wait", wave=wave, journal_files=sorted(f for f in os.listdir(kdir) if f.startswith("db-")))
    live.consume(K, lambda r: r["seq"] % 2 == 0)
    time.sleep(2.5)
    b.stop(); run.broker_timings.append(b.timings)
    return finish(run, live, broker_config="tools/" + cfg,
                  scenario="3 waves of 70 sends (85% to fx.f4.q); waves 0,1 fully acked on fx.f4.q, wave 2 partly; "
                           "GC (cleanupInterval=1000) runs between waves; then half of fx.f4.keep acked.")


def f5_kill():
    """clean run, then a run with no checkpoints ending in SIGKILL (index behind the journal)"""
    run = mf.Run("f5-kill", 7105)
    cfg1 = config("f5-run1", kaha(65536))
    cfg2 = config("f5-run2", kaha(65536, 'checkpointInterval="600000" cleanupInterval="600000"'))
    live = Live(run)
    Q, S, T = "/queue/fx.f5.q", "/queue/fx.f5.side", "/topic/fx.f5.t"
    seq = {Q: 0, S: 0, T: 0}
    b = run.broker(cfg1); b.start()
    subscribe_durable(run, T, "f5-d", "sd")
    p = Stomp(PORT)
    for _ in range(80):
        d = run.rng.choice((Q, Q, S, T))
        seq[d] += 1
        f = run.send(p, d, seq[d])["fx_id"]
        live.add("sd" if d == T else d, f)
    p.disconnect()
    live.consume(Q, lambda r: r["seq"] % 2 == 0)
    b.stop(); run.broker_timings.append(b.timings)
    b = run.broker(cfg2); b.start()
    p = Stomp(PORT)
    for _ in range(90):
        d = run.rng.choice((Q, S, T))
        seq[d] += 1
        live.add("sd" if d == T else d, run.send(p, d, seq[d])["fx_id"])
    p.disconnect()
    live.consume(S, lambda r: r["seq"] % 3 != 0)
    live.consume(T, lambda r: r["seq"] % 2 == 1, client_id="f5-d", durable="sd", key="sd")
    p = Stomp(PORT)
    p.begin("f5-open")
    for _ in range(4):
        seq[Q] += 1
        run.send(p, Q, seq[Q], tx="f5-open")
    for _ in range(25):
        seq[Q] += 1
        run.send(p, Q, seq[Q], receipt=False, size=run.rng.randint(100, 2000))
    time.sleep(0.03)
    b.kill9()
    run.ev("sigkill", pid=b.proc.pid)
    run.broker_timings.append(b.timings)
    try:
        p.sock.close()
    except Exception:
        pass
    return finish(run, live, broker_config=["tools/" + cfg1, "tools/" + cfg2],
                  scenario="run1 clean (80 sends, durable sub, half of fx.f5.q acked); run2 without checkpoints: "
                           "90 sends, acks on side queue and durable sub, an open tx of 4 sends, 25 sends without "
                           "receipt, SIGKILL. live_in covers confirmed state only (open tx / no-receipt not counted).")


def f6_mkahadb():
    """mKahaDB, 32 KiB files per sub-store, perDestination + a filtered wildcard store, cross-store txs"""
    run = mf.Run("f6-mkahadb", 7106)
    sub = ('<kahaDB journalMaxFileLength="32768" checksumJournalFiles="true" checkForCorruptJournalFiles="true"/>')
    cfg = config("f6", '<mKahaDB directory="${fx.data}/mkahadb" journalMaxFileLength="32768" checkForCorruption="true">'
                 '<filteredPersistenceAdapters>'
                 '<filteredKahaDB queue="fx.f6.grp.>"><persistenceAdapter>%s</persistenceAdapter></filteredKahaDB>'
                 '<filteredKahaDB perDestination="true"><persistenceAdapter>%s</persistenceAdapter></filteredKahaDB>'
                 '</filteredPersistenceAdapters></mKahaDB>' % (sub, sub))
    b = run.broker(cfg); b.start()
    live = Live(run)
    G1, G2, P, T = "/queue/fx.f6.grp.one", "/queue/fx.f6.grp.two", "/queue/fx.f6.own", "/topic/fx.f6.t"
    subscribe_durable(run, T, "f6-d", "md")
    seq = {}
    p = Stomp(PORT)
    for _ in range(120):
        d = run.rng.choice((G1, G2, P, T))
        seq[d] = seq.get(d, 0) + 1
        live.add("md" if d == T else d, run.send(p, d, seq[d], size=mf.log_uniform_size(run.rng, 10, 4000))["fx_id"])
    for t, commit in (("f6-tx-1", True), ("f6-tx-2", False), ("f6-tx-3", True)):
        p.begin(t)
        ids = []
        for d in (G1, P, G2, P):
            seq[d] += 1
            ids.append((d, run.send(p, d, seq[d], size=600, tx=t)["fx_id"]))
        (p.commit if commit else p.abort)(t)
        if commit:
            for d, f in ids:
                live.add(d, f)
    p.disconnect()
    live.consume(G1, lambda r: r["seq"] % 2 == 0)
    live.consume(P, lambda r: r["seq"] <= 15)
    live.consume(T, lambda r: r["seq"] % 3 == 0, client_id="f6-d", durable="md", key="md")
    b.stop(); run.broker_timings.append(b.timings)
    return finish(run, live, store="mkahadb", broker_config="tools/" + cfg,
                  scenario="mKahaDB: fx.f6.grp.> share one filtered store, others perDestination; 120 sends; "
                           "3 txs spanning stores (commit, abort, commit); partial acks.")


def f7_kill_gc():
    """frequent checkpoints + GC, then SIGKILL in the middle of acks and sends"""
    run = mf.Run("f7-kill-gc", 7107)
    cfg = config("f7", kaha(32768, 'checkpointInterval="700" cleanupInterval="1500"'))
    b = run.broker(cfg); b.start()
    live = Live(run)
    Q, K = "/queue/fx.f7.q", "/queue/fx.f7.k"
    seq = {Q: 0, K: 0}
    p = Stomp(PORT)
    for _ in range(120):
        d = run.rng.choice((Q, Q, K))
        seq[d] += 1
        live.add(d, run.send(p, d, seq[d], size=run.rng.randint(200, 1500))["fx_id"])
    p.disconnect()
    live.consume(Q, lambda r: r["seq"] <= 60)
    time.sleep(2.5)
    p = Stomp(PORT)
    for _ in range(60):
        d = run.rng.choice((Q, K))
        seq[d] += 1
        live.add(d, run.send(p, d, seq[d], size=run.rng.randint(200, 1500))["fx_id"])
    live.consume(K, lambda r: r["seq"] % 2 == 1)
    for _ in range(30):
        seq[Q] += 1
        run.send(p, Q, seq[Q], receipt=False, size=run.rng.randint(100, 1500))
    time.sleep(0.02)
    b.kill9()
    run.broker_timings.append(b.timings)
    try:
        p.sock.close()
    except Exception:
        pass
    return finish(run, live, broker_config="tools/" + cfg,
                  scenario="GC+checkpoints every ~1 s; 120 sends, half of Q acked, GC wait; 60 more sends, half of "
                           "K acked, 30 sends without receipt, SIGKILL (index a checkpoint behind the journal).")


def f8_mkahadb_kill():
    """mKahaDB (a filtered store + perDestination, 16 KiB files), checkpoints off, SIGKILL mid-traffic"""
    run = mf.Run("f8-mkahadb-kill", 7208)
    sub = ('<kahaDB journalMaxFileLength="16384" checksumJournalFiles="true" checkForCorruptJournalFiles="true" '
           'checkpointInterval="600000" cleanupInterval="600000"/>')
    cfg = config("f8", '<mKahaDB directory="${fx.data}/mkahadb" journalMaxFileLength="16384" checkForCorruption="true">'
                 '<filteredPersistenceAdapters>'
                 '<filteredKahaDB queue="fx.f8.grp.>"><persistenceAdapter>%s</persistenceAdapter></filteredKahaDB>'
                 '<filteredKahaDB perDestination="true"><persistenceAdapter>%s</persistenceAdapter></filteredKahaDB>'
                 '</filteredPersistenceAdapters></mKahaDB>' % (sub, sub))
    b = run.broker(cfg); b.start()
    live = Live(run)
    G1, G2, P = "/queue/fx.f8.grp.one", "/queue/fx.f8.grp.two", "/queue/fx.f8.own"
    seq = {}
    p = Stomp(PORT)
    for _ in range(90):
        d = run.rng.choice((G1, G2, P))
        seq[d] = seq.get(d, 0) + 1
        live.add(d, run.send(p, d, seq[d], size=mf.log_uniform_size(run.rng, 10, 3000))["fx_id"])
    p.begin("f8-tx-1")
    ids = []
    for d in (G1, P, G2):
        seq[d] += 1
        ids.append(run.send(p, d, seq[d], size=500, tx="f8-tx-1")["fx_id"])
    p.commit("f8-tx-1")
    for d, f in zip((G1, P, G2), ids):
        live.add(d, f)
    p.disconnect()
    live.consume(G1, lambda r: r["seq"] % 2 == 0)
    live.consume(P, lambda r: r["seq"] % 3 != 0)
    p = Stomp(PORT)
    for _ in range(20):
        d = run.rng.choice((G2, P))
        seq[d] += 1
        run.send(p, d, seq[d], receipt=False, size=run.rng.randint(100, 1500))
    time.sleep(0.03)
    b.kill9()
    run.ev("sigkill", pid=b.proc.pid)
    run.broker_timings.append(b.timings)
    try:
        p.sock.close()
    except Exception:
        pass
    return finish(run, live, store="mkahadb", broker_config="tools/" + cfg,
                  scenario="mKahaDB, 16 KiB files, no checkpoint after start: 90 sends over a filtered store "
                           "(fx.f8.grp.>) and a perDestination one, a committed cross-store tx, partial acks, "
                           "20 sends without receipt, SIGKILL.")


def f9_kill_16k():
    """16 KiB files, a clean run then a checkpoint-less run ending in SIGKILL (another seed for f5's shape)"""
    run = mf.Run("f9-kill-16k", 7209)
    cfg1 = config("f9-run1", kaha(16384))
    cfg2 = config("f9-run2", kaha(16384, 'checkpointInterval="600000" cleanupInterval="600000"'))
    live = Live(run)
    Q, S = "/queue/fx.f9.q", "/queue/fx.f9.side"
    seq = {Q: 0, S: 0}
    b = run.broker(cfg1); b.start()
    p = Stomp(PORT)
    for _ in range(60):
        d = run.rng.choice((Q, Q, S))
        seq[d] += 1
        live.add(d, run.send(p, d, seq[d], size=run.rng.randint(50, 1800))["fx_id"])
    p.disconnect()
    live.consume(Q, lambda r: r["seq"] % 3 == 0)
    b.stop(); run.broker_timings.append(b.timings)
    b = run.broker(cfg2); b.start()
    p = Stomp(PORT)
    for _ in range(70):
        d = run.rng.choice((Q, S))
        seq[d] += 1
        live.add(d, run.send(p, d, seq[d], size=run.rng.randint(50, 1800))["fx_id"])
    p.disconnect()
    live.consume(S, lambda r: r["seq"] % 2 == 0)
    live.consume(Q, lambda r: r["seq"] % 5 == 1)
    p = Stomp(PORT)
    for _ in range(15):
        seq[Q] += 1
        run.send(p, Q, seq[Q], receipt=False, size=run.rng.randint(100, 1500))
    time.sleep(0.03)
    b.kill9()
    run.ev("sigkill", pid=b.proc.pid)
    run.broker_timings.append(b.timings)
    try:
        p.sock.close()
    except Exception:
        pass
    return finish(run, live, broker_config=["tools/" + cfg1, "tools/" + cfg2],
                  scenario="16 KiB files. run1 clean (60 sends, a third of fx.f9.q acked); run2 without "
                           "checkpoints: 70 sends, acks on both queues, 15 sends without receipt, SIGKILL.")


def f10_shrink():
    """journalMaxFileLength lowered between two runs (64 KiB, then 16 KiB), clean stop"""
    run = mf.Run("f10-shrink", 7210)
    cfg1 = config("f10-run1", kaha(65536))
    cfg2 = config("f10-run2", kaha(16384))
    live = Live(run)
    Q = "/queue/fx.f10.q"
    seq = {Q: 0}
    for cfg, n in ((cfg1, 70), (cfg2, 40)):
        b = run.broker(cfg); b.start()
        p = Stomp(PORT)
        for _ in range(n):
            seq[Q] += 1
            live.add(Q, run.send(p, Q, seq[Q], size=run.rng.randint(200, 2000))["fx_id"])
        p.disconnect()
        live.consume(Q, lambda r: r["seq"] % 4 == 0)
        b.stop(); run.broker_timings.append(b.timings)
    return finish(run, live, broker_config=["tools/" + cfg1, "tools/" + cfg2],
                  scenario="run1 with 64 KiB files (70 sends, a quarter acked), clean stop; run2 with 16 KiB files "
                           "(40 sends, a quarter of what is left acked), clean stop.")


def f11_shrink_kill():
    """journalMaxFileLength lowered between runs (64 KiB, then 16 KiB), the second run killed in its first file"""
    run = mf.Run("f11-shrink-kill", 7211)
    cfg1 = config("f11-run1", kaha(65536))
    cfg2 = config("f11-run2", kaha(16384, 'checkpointInterval="600000" cleanupInterval="600000"'))
    live = Live(run)
    Q = "/queue/fx.f11.q"
    seq = {Q: 0}
    b = run.broker(cfg1); b.start()
    p = Stomp(PORT)
    for _ in range(70):
        seq[Q] += 1
        live.add(Q, run.send(p, Q, seq[Q], size=run.rng.randint(200, 2000))["fx_id"])
    p.disconnect()
    live.consume(Q, lambda r: r["seq"] % 4 == 0)
    b.stop(); run.broker_timings.append(b.timings)
    b = run.broker(cfg2); b.start()
    p = Stomp(PORT)
    for _ in range(6):
        seq[Q] += 1
        live.add(Q, run.send(p, Q, seq[Q], size=run.rng.randint(200, 1500))["fx_id"])
    for _ in range(3):
        seq[Q] += 1
        run.send(p, Q, seq[Q], receipt=False, size=run.rng.randint(100, 800))
    time.sleep(0.03)
    b.kill9()
    run.ev("sigkill", pid=b.proc.pid)
    run.broker_timings.append(b.timings)
    try:
        p.sock.close()
    except Exception:
        pass
    return finish(run, live, broker_config=["tools/" + cfg1, "tools/" + cfg2],
                  scenario="run1 with 64 KiB files (70 sends, a quarter acked), clean stop; run2 with 16 KiB files "
                           "and no checkpoint: 6 sends, 3 without receipt, SIGKILL (the newest file is the only "
                           "16 KiB one).")


def consume_selected(run, live, dest, key, ack_pred, client_id, durable, selector):
    """Live.consume for a durable subscription with a selector: the selector is given again at every
    subscribe (a changed one makes the broker drop and recreate the subscription)"""
    n = len(live.q.get(key, []))
    if n == 0:
        return []
    c = Stomp(PORT, client_id=client_id)
    c.subscribe(dest, "s1", durable_name=durable, extra={"selector": selector} if selector else None)
    frames = c.receive(n, timeout=30)
    if len(frames) != n:
        raise RuntimeError("%s/%s: expected %d got %d" % (dest, durable, n, len(frames)))
    acked = []
    for f in frames:
        rec = run.note_msg(f)
        if ack_pred(rec):
            c.ack(f)
            acked.append(rec["fx_id"])
    c.disconnect()
    run.ev("consume", destination=dest, durable=durable, client_id=client_id, selector=selector,
           received=len(frames), acked=len(acked))
    s = set(acked)
    live.q[key] = [f for f in live.q[key] if f not in s]
    return acked


def subscribe_selected(run, topic, cid, sub, selector):
    c = Stomp(PORT, client_id=cid)
    c.subscribe(topic, "s1", durable_name=sub, extra={"selector": selector} if selector else None)
    c.disconnect()
    run.ev("durable_subscribed", client_id=cid, subscription=sub, destination=topic, selector=selector)


def send_colored(run, p, live, dest, seq, subs, size, receipt=True, tx=None):
    """a send to topic ``dest`` with a ``color`` property; added to each of ``subs`` ((key, color or None))
    whose selector it matches (when it is confirmed)"""
    color = run.rng.choice(("red", "red", "blue", "green"))
    m = run.send(p, dest, seq, size=size, receipt=receipt, tx=tx, extra={"color": color})
    if receipt and tx is None:
        for key, want in subs:
            if want is None or want == color:
                live.add(key, m["fx_id"])
    return m, color


def f12_subs_kill():
    """durable topic subscribers with selectors (one matching nothing), indexCacheSize 16, journal disk syncs
    off, checkpoints and GC every ~1 s, SIGKILL in the middle of acks and sends"""
    run = mf.Run("f12-subs-kill", 8312)
    cfg = config("f12", kaha(32768, 'indexCacheSize="16" journalDiskSyncStrategy="never" '
                                    'checkpointInterval="800" cleanupInterval="1600"'))
    b = run.broker(cfg); b.start()
    live = Live(run)
    T, Q = "/topic/fx.f12.t", "/queue/fx.f12.q"
    subs = (("red", "red"), ("all", None), ("none", "purple"))
    sel = {"red": "color = 'red'", "all": None, "none": "color = 'purple'"}
    for key, _c in subs:
        subscribe_selected(run, T, "f12-" + key, key, sel[key])
    seq = {T: 0, Q: 0}
    p = Stomp(PORT)
    for _ in range(140):
        d = run.rng.choice((T, T, Q))
        seq[d] += 1
        size = mf.log_uniform_size(run.rng, 20, 2500)
        if d == T:
            send_colored(run, p, live, T, seq[T], subs, size)
        else:
            live.add(Q, run.send(p, Q, seq[Q], size=size)["fx_id"])
    p.disconnect()
    consume_selected(run, live, T, "red", lambda r: r["seq"] % 2 == 0, "f12-red", "red", sel["red"])
    consume_selected(run, live, T, "all", lambda r: r["seq"] <= 40, "f12-all", "all", None)
    live.consume(Q, lambda r: r["seq"] % 3 != 0)
    time.sleep(2.5)  # checkpoints and GC passes over the acknowledged files
    p = Stomp(PORT)
    for _ in range(60):
        d = run.rng.choice((T, Q))
        seq[d] += 1
        size = mf.log_uniform_size(run.rng, 20, 2500)
        if d == T:
            send_colored(run, p, live, T, seq[T], subs, size)
        else:
            live.add(Q, run.send(p, Q, seq[Q], size=size)["fx_id"])
    p.disconnect()
    consume_selected(run, live, T, "red", lambda r: True, "f12-red", "red", sel["red"])
    p = Stomp(PORT)
    for _ in range(25):
        seq[T] += 1
        send_colored(run, p, live, T, seq[T], subs, run.rng.randint(100, 1500), receipt=False)
    time.sleep(0.02)
    b.kill9()
    run.ev("sigkill", pid=b.proc.pid)
    run.broker_timings.append(b.timings)
    try:
        p.sock.close()
    except Exception:
        pass
    return finish(run, live, broker_config="tools/" + cfg,
                  scenario="a topic with 3 durable subscriptions (selector color='red', none, color='purple' "
                           "matching nothing) and a queue; indexCacheSize=16, journalDiskSyncStrategy=never, "
                           "checkpoint/GC every ~1 s; 140 sends, red acks half, all acks seq<=40, queue 2/3 acked, "
                           "GC wait; 60 more sends, red acks everything; 25 topic sends without receipt, SIGKILL.")


def f13_mkahadb_topics_kill():
    """mKahaDB: a filtered store for topics fx.f13.t.> with durable subscribers, queues perDestination;
    STOMP transactions over both stores (the txStore's two-phase journal), SIGKILL right after a commit"""
    run = mf.Run("f13-mkahadb-topics-kill", 8313)
    sub = ('<kahaDB journalMaxFileLength="16384" checksumJournalFiles="true" checkForCorruptJournalFiles="true" '
           'indexCacheSize="32" checkpointInterval="1000" cleanupInterval="2000"/>')
    cfg = config("f13", '<mKahaDB directory="${fx.data}/mkahadb" journalMaxFileLength="16384" checkForCorruption="true">'
                 '<filteredPersistenceAdapters>'
                 '<filteredKahaDB topic="fx.f13.t.>"><persistenceAdapter>%s</persistenceAdapter></filteredKahaDB>'
                 '<filteredKahaDB perDestination="true"><persistenceAdapter>%s</persistenceAdapter></filteredKahaDB>'
                 '</filteredPersistenceAdapters></mKahaDB>' % (sub, sub))
    b = run.broker(cfg); b.start()
    live = Live(run)
    T1, T2, Q = "/topic/fx.f13.t.one", "/topic/fx.f13.t.two", "/queue/fx.f13.q"
    subs1 = (("t1-all", None), ("t1-blue", "blue"))
    subs2 = (("t2-all", None),)
    sel = {"t1-all": None, "t1-blue": "color = 'blue'", "t2-all": None}
    subscribe_selected(run, T1, "f13-t1-all", "t1-all", None)
    subscribe_selected(run, T1, "f13-t1-blue", "t1-blue", sel["t1-blue"])
    subscribe_selected(run, T2, "f13-t2-all", "t2-all", None)
    seq = {T1: 0, T2: 0, Q: 0}
    p = Stomp(PORT)
    for _ in range(90):
        d = run.rng.choice((T1, T2, Q))
        seq[d] += 1
        size = mf.log_uniform_size(run.rng, 20, 3000)
        if d == Q:
            live.add(Q, run.send(p, Q, seq[Q], size=size)["fx_id"])
        else:
            send_colored(run, p, live, d, seq[d], subs1 if d == T1 else subs2, size)
    for t, commit in (("f13-tx-1", True), ("f13-tx-2", False), ("f13-tx-3", True)):
        p.begin(t)
        done = []
        for d in (T1, Q, T2, Q):
            seq[d] += 1
            if d == Q:
                done.append((Q, None, run.send(p, Q, seq[Q], size=700, tx=t)))
            else:
                m, color = send_colored(run, p, live, d, seq[d], (), 700, tx=t)
                done.append((d, color, m))
        (p.commit if commit else p.abort)(t)
        if commit:
            for d, color, m in done:
                if d == Q:
                    live.add(Q, m["fx_id"])
                else:
                    for key, want in (subs1 if d == T1 else subs2):
                        if want is None or want == color:
                            live.add(key, m["fx_id"])
    p.disconnect()
    consume_selected(run, live, T1, "t1-blue", lambda r: r["seq"] % 2 == 1, "f13-t1-blue", "t1-blue", sel["t1-blue"])
    consume_selected(run, live, T2, "t2-all", lambda r: r["seq"] <= 25, "f13-t2-all", "t2-all", None)
    live.consume(Q, lambda r: r["seq"] % 2 == 0)
    time.sleep(2.5)
    p = Stomp(PORT)
    p.begin("f13-tx-4")
    for d in (T1, Q, T2):
        seq[d] += 1
        if d == Q:
            run.send(p, Q, seq[Q], size=400, tx="f13-tx-4")
        else:
            send_colored(run, p, live, d, seq[d], (), 400, tx="f13-tx-4")
    p.commit("f13-tx-4")  # (its messages are not counted live: the commit's receipt came, but what the kill
    #                        leaves of the txStore's outcome is what the harness judges)
    for _ in range(15):
        d = run.rng.choice((T1, Q))
        seq[d] += 1
        run.send(p, d, seq[d], receipt=False, size=run.rng.randint(100, 1500))
    time.sleep(0.02)
    b.kill9()
    run.ev("sigkill", pid=b.proc.pid)
    run.broker_timings.append(b.timings)
    try:
        p.sock.close()
    except Exception:
        pass
    return finish(run, live, store="mkahadb", broker_config="tools/" + cfg,
                  scenario="mKahaDB, 16 KiB files, indexCacheSize=32, checkpoint/GC every 1-2 s: topics fx.f13.t.> "
                           "in one filtered store (3 durable subscriptions, one with selector color='blue'), the "
                           "queue perDestination; 90 sends, 3 transactions over both stores (commit, abort, "
                           "commit), partial acks, GC wait; a 4th cross-store transaction committed, 15 sends "
                           "without receipt, SIGKILL.")


ALL = {f.__name__.split("_", 1)[0]: f for f in
       (f1_small_files, f2_big_bodies, f3_tx, f4_gc, f5_kill, f6_mkahadb, f7_kill_gc,
        f8_mkahadb_kill, f9_kill_16k, f10_shrink, f11_shrink_kill, f12_subs_kill, f13_mkahadb_topics_kill)}

if __name__ == "__main__":
    for n in sys.argv[1:] or list(ALL):
        t = time.time()
        ALL[n]()
        print("  %s took %.1fs" % (n, time.time() - t))
