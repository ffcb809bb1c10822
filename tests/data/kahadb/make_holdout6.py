#!/usr/bin/env python3
"""Sixth set of hold-out KahaDB stores from the real ActiveMQ 5.17.2 broker (kl52 lane), shapes sets 1-5 do not
cover: tiny (4 KiB) and large (4 MiB) journal files, concurrentStoreAndDispatchQueues off, enableJournalDiskSyncs
off, archiveDataLogs, indexCacheSize 4, 64 destinations, durable subscriptions removed (UNSUBSCRIBE), message
groups, expiry into ActiveMQ.DLQ, mKahaDB with perDestination filters, a SIGKILL during a GC pass.

usage: PYTHONPATH=/work/shared/fixtures/kahadb/tools make_holdout6.py [r1 ...]
       ->  /work/kahadb-holdout6/<name>/{kahadb|mkahadb, manifest.json, broker.log}

Broker configs are written to a copy of the fixture tools under $TMPDIR, never into the shared fixtures.
Broker on 127.0.0.1:61726 (STOMP only), stopped by PID.
"""
import os, sys, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
os.environ.setdefault("TMPDIR", "/tmp/kl52")
os.makedirs(os.environ["TMPDIR"], exist_ok=True)
import make_fresh as fr  # noqa: E402
import make_fixtures as mf  # noqa: E402
import make_holdout3 as h3  # noqa: E402
from stompfx import Stomp  # noqa: E402

PORT = 61726
TOOLS = fr.isolate(PORT, "amq-holdout6", os.environ.get("HOLDOUT6", "/work/kahadb-holdout6"), h3)
NOSYNC = 'enableJournalDiskSyncs="false" concurrentStoreAndDispatchQueues="false"'


def unsubscribe(run, cid, sub):
    """remove durable subscription ``sub`` of client ``cid`` (STOMP UNSUBSCRIBE with its subscription name: the
    broker's RemoveSubscriptionInfo, a KahaRemoveSubscriptionCommand in the journal)"""
    c = Stomp(PORT, client_id=cid)
    c.request("UNSUBSCRIBE", {"id": "s1", "activemq.subscriptionName": sub})
    c.disconnect()
    run.ev("durable_unsubscribed", client_id=cid, subscription=sub)


def r1():
    """4 KiB files (most records cross files), journal disk syncs and concurrent store-and-dispatch off,
    indexCacheSize=4, checkpoint 400 ms, GC 800 ms; a clean run of two waves, then a run SIGKILLed right after a
    large ack wave (the GC pass that frees the acked files is due)"""
    run = mf.Run("r1-tiny-nosync-gckill", 9621)
    opts = NOSYNC + ' indexCacheSize="4" checkpointInterval="400" cleanupInterval="800"'
    cfgs = [h3.config("r1-run%d" % (r + 1), fr.kaha(4096, opts)) for r in range(2)]
    live = fr.Live(run)
    A, B, K = "/queue/fx.r1.a", "/queue/fx.r1.b", "/queue/fx.r1.keep"
    seq, nxt = h3.counter()
    for r, cfg in enumerate(cfgs):
        b = run.broker(cfg); b.start()
        for wave in range(2):
            p = Stomp(PORT)
            for _ in range(60):
                d = run.rng.choice((A, A, B, K))
                live.add(d, run.send(p, d, nxt(d), size=mf.log_uniform_size(run.rng, 20, 6000))["fx_id"])
            p.disconnect()
            if r == 1 and wave == 1:
                break
            live.consume(A, lambda x, w=wave: x["seq"] % 4 != w)
            live.consume(B, lambda x: x["seq"] % 2 == 1)
            time.sleep(1.0)
        if r == 0:
            live.consume(K, lambda x: x["seq"] % 3 == 0)
            time.sleep(1.5)
            b.stop(); run.broker_timings.append(b.timings)
            continue
        live.consume(A, lambda x: True)
        live.consume(B, lambda x: True)
        time.sleep(0.75)
        h3.killed(run, b)
    return fr.finish(run, live, broker_config=["tools/" + c for c in cfgs],
                     scenario="4096-byte files, enableJournalDiskSyncs=false, concurrentStoreAndDispatchQueues=false, "
                              "indexCacheSize=4, checkpoint 400 ms, GC 800 ms; run1: 2 waves of 60 sends over a, b, "
                              "keep with partial acks, clean stop; run2: a wave with acks, a wave of 60, every message "
                              "of a and b acked, SIGKILL 0.75 s later (during or right before a GC pass).")


def r2():
    """4 MiB files (the whole store in one file), 60 queues and 4 topics with a durable subscription each,
    indexCacheSize=4, indexWriteBatchSize=7; two clean runs (a healthy store)"""
    run = mf.Run("r2-many-dests-big-clean", 9622)
    cfgs = [h3.config("r2-run%d" % (r + 1), fr.kaha(4 * 1024 * 1024, 'indexCacheSize="4" indexWriteBatchSize="7"'))
            for r in range(2)]
    live = fr.Live(run)
    qs = ["/queue/fx.r2.q%02d" % i for i in range(60)]
    ts = ["/topic/fx.r2.t%d" % i for i in range(4)]
    seq, nxt = h3.counter()
    for r, cfg in enumerate(cfgs):
        b = run.broker(cfg); b.start()
        if r == 0:
            for i, t in enumerate(ts):
                fr.subscribe_durable(run, t, "r2-d%d" % i, "s%d" % i)
        p = Stomp(PORT)
        for _ in range(300 if r == 0 else 150):
            d = run.rng.choice(qs + ts)
            m = run.send(p, d, nxt(d), size=mf.log_uniform_size(run.rng, 20, 9000))
            live.add("s%d" % ts.index(d) if d in ts else d, m["fx_id"])
        p.disconnect()
        for q in run.rng.sample(qs, 25):
            live.consume(q, lambda x, r=r: x["seq"] % 3 != r)
        for i, t in enumerate(ts[:2]):
            live.consume(t, lambda x: x["seq"] % 2 == 0, client_id="r2-d%d" % i, durable="s%d" % i, key="s%d" % i)
        b.stop(); run.broker_timings.append(b.timings)
    return fr.finish(run, live, broker_config=["tools/" + c for c in cfgs],
                     scenario="4 MiB files, indexCacheSize=4, indexWriteBatchSize=7; 60 queues fx.r2.q00-59 and 4 "
                              "topics each with a durable sub; run1 300 sends, run2 150, each run acks part of 25 "
                              "random queues and of the subs of t0/t1; two clean stops.")


def r3():
    """32 KiB files; a topic with four durable subscriptions of which two are removed (one after partial acks,
    one with messages pending, right before the kill); a queue of message groups; messages with a 1.5 s expiry
    left to expire while the broker is down and moved into ActiveMQ.DLQ in run 2; run 2 SIGKILLed during a burst"""
    run = mf.Run("r3-unsub-groups-ttl-kill", 9623)
    cfgs = [h3.config("r3-run1", fr.kaha(32768, 'checkpointInterval="700" cleanupInterval="1200"')),
            h3.config("r3-run2", fr.kaha(32768, 'checkpointInterval="1000" cleanupInterval="2000"'))]
    live = fr.Live(run)
    T, G, X = "/topic/fx.r3.t", "/queue/fx.r3.groups", "/queue/fx.r3.ttl"
    DLQ = "/queue/ActiveMQ.DLQ"
    subs = ["u1", "u2", "k1", "k2"]
    seq, nxt = h3.counter()
    expired = []
    b = run.broker(cfgs[0]); b.start()
    for s in subs:
        fr.subscribe_durable(run, T, "r3-" + s, s)
    p = Stomp(PORT)
    for _ in range(120):
        d = run.rng.choice((T, T, G))
        if d == T:
            m = run.send(p, T, nxt(T), size=mf.log_uniform_size(run.rng, 20, 3000))
            for s in subs:
                live.add(s, m["fx_id"])
        else:
            m = run.send(p, G, nxt(G), size=mf.log_uniform_size(run.rng, 20, 3000),
                         extra={"JMSXGroupID": "g%d" % run.rng.randint(1, 4)})
            live.add(G, m["fx_id"])
    h3.send_ttl(run, p, live, X, nxt, 12, 4, (100, 1500), expired)
    p.disconnect()
    live.consume(T, lambda x: x["seq"] % 2 == 0, client_id="r3-u1", durable="u1", key="u1")
    unsubscribe(run, "r3-u1", "u1")
    live.q.pop("u1", None)
    live.consume(T, lambda x: x["seq"] <= 30, client_id="r3-k1", durable="k1", key="k1")
    live.consume(G, lambda x: x["seq"] % 3 == 0)
    time.sleep(2.0)
    b.stop(); run.broker_timings.append(b.timings)
    time.sleep(1.0)  # the expiries pass while the broker is down
    b = run.broker(cfgs[1]); b.start()
    h3.drain_expired(run, live, X, DLQ, expired)
    p = Stomp(PORT)
    for _ in range(50):
        d = run.rng.choice((T, G))
        m = run.send(p, d, nxt(d), size=mf.log_uniform_size(run.rng, 20, 3000),
                     extra={"JMSXGroupID": "g%d" % run.rng.randint(1, 4)} if d == G else None)
        for k in (("u2", "k1", "k2") if d == T else (G,)):
            live.add(k, m["fx_id"])
    p.disconnect()
    live.consume(T, lambda x: x["seq"] % 3 != 0, client_id="r3-k2", durable="k2", key="k2")
    unsubscribe(run, "r3-u2", "u2")
    live.q.pop("u2", None)
    live.consume(G, lambda x: x["seq"] % 2 == 1)
    stop = threading.Event()
    bp, bt, sent = h3.burst(run, (T, G), 200, seq, lambda: mf.log_uniform_size(run.rng, 30, 2500), stop)
    time.sleep(0.3)
    h3.killed(run, b, bp)
    stop.set(); bt.join(5)
    run.ev("burst", attempted=len(sent))
    return fr.finish(run, live, broker_config=["tools/" + c for c in cfgs], expired_to_dlq=expired,
                     scenario="32768-byte files; topic fx.r3.t with durable subs u1, u2, k1, k2; fx.r3.groups with "
                              "JMSXGroupID g1-g4; run1 (checkpoint 700 ms, GC 1.2 s): 120 sends, 12 to fx.r3.ttl (9 "
                              "with expires=now+1.5 s), u1 acks half then is UNSUBSCRIBEd, k1 and groups acked in "
                              "part, clean stop; run2: the 9 expire into ActiveMQ.DLQ at the drain of fx.r3.ttl, 50 "
                              "sends, k2 acks, u2 UNSUBSCRIBEd with messages pending, groups acked, a burst of up to "
                              "200 sends without receipt SIGKILLed after 0.3 s (not in the live sets).")


def r4():
    """mKahaDB, 16 KiB files: queues fx.r4.orders.> in one filtered store, topics fx.r4.> in another with a
    durable subscription, every other destination in a store of its own (perDestination); cross-store send
    transactions and an ack transaction; SIGKILL during a burst"""
    run = mf.Run("r4-mkahadb-perdest-kill", 9624)
    sub = ('<kahaDB journalMaxFileLength="16384" checksumJournalFiles="true" checkForCorruptJournalFiles="true" '
           'checkpointInterval="600" cleanupInterval="1100" %s/>' % NOSYNC)
    cfg = h3.config("r4", '<mKahaDB directory="${fx.data}/mkahadb" journalMaxFileLength="16384" '
                    'checkForCorruption="true"><filteredPersistenceAdapters>'
                    '<filteredKahaDB queue="fx.r4.orders.>"><persistenceAdapter>%s</persistenceAdapter>'
                    '</filteredKahaDB>'
                    '<filteredKahaDB topic="fx.r4.>"><persistenceAdapter>%s</persistenceAdapter></filteredKahaDB>'
                    '<filteredKahaDB perDestination="true"><persistenceAdapter>%s</persistenceAdapter>'
                    '</filteredKahaDB>'
                    '</filteredPersistenceAdapters></mKahaDB>' % (sub, sub, sub))
    live = fr.Live(run)
    O1, O2, O3 = "/queue/fx.r4.orders.eu", "/queue/fx.r4.orders.us", "/queue/fx.r4.orders.apac"
    M, T = "/queue/fx.r4.misc", "/topic/fx.r4.t"
    seq, nxt = h3.counter()
    txs = []
    b = run.broker(cfg); b.start()
    fr.subscribe_durable(run, T, "r4-d", "d")
    for wave in range(3):
        p = Stomp(PORT)
        for _ in range(60):
            d = run.rng.choice((O1, O2, O3, M, T))
            m = run.send(p, d, nxt(d), size=mf.log_uniform_size(run.rng, 30, 3500))
            live.add("d" if d == T else d, m["fx_id"])
        tx = "r4-tx-%d" % wave
        p.begin(tx)
        ids = [(d, run.send(p, d, nxt(d), size=run.rng.randint(100, 1500), tx=tx)["fx_id"]) for d in (O1, M, O3)]
        fr.settle(p, tx, wave != 1, ids, live, txs)
        p.disconnect()
        live.consume(O1, lambda x, w=wave: x["seq"] % 3 != w)
        live.consume(O2, lambda x: x["seq"] % 2 == 0, tx="r4-ack-o2-%d" % wave, commit=wave != 2)
        live.consume(M, lambda x: x["seq"] % 4 == 1)
        live.consume(T, lambda x, w=wave: x["seq"] % 2 == w % 2, client_id="r4-d", durable="d", key="d")
        time.sleep(1.5)
    stop = threading.Event()
    bp, bt, sent = h3.burst(run, (O1, O2, M), 250, seq, lambda: mf.log_uniform_size(run.rng, 30, 2000), stop)
    time.sleep(0.3)
    h3.killed(run, b, bp)
    stop.set(); bt.join(5)
    run.ev("burst", attempted=len(sent))
    return fr.finish(run, live, store="mkahadb", broker_config="tools/" + cfg, transactions=txs,
                     scenario="mKahaDB, 16384-byte files, every child with checkpoint 600 ms, GC 1.1 s, journal disk "
                              "syncs and concurrentStoreAndDispatchQueues off: fx.r4.orders.> filtered, topics "
                              "fx.r4.> filtered (durable sub r4-d/d), the rest perDestination; 3 waves of 60 sends + a "
                              "cross-store send tx (commit, abort, commit), an ack tx on orders.us (commit, commit, "
                              "abort), partial acks, 1.5 s GC waits; a burst of up to 250 sends SIGKILLed after 0.3 s.")


def r5():
    """24 KiB files with archiveDataLogs (GC moves freed files to the archive directory), checkpoint and GC every
    300 ms, enableAckCompaction with compactAcksAfterNoGC=2; a clean run, then a run SIGKILLed in the middle of a
    GC pass over a fully acked queue"""
    run = mf.Run("r5-archive-gc-kill", 9625)
    opts = ('archiveDataLogs="true" checkpointInterval="300" cleanupInterval="300" compactAcksAfterNoGC="2" '
            'compactAcksIgnoresStoreGrowth="true"')
    cfgs = [h3.config("r5-run%d" % (r + 1), fr.kaha(24576, opts)) for r in range(2)]
    live = fr.Live(run)
    Q, K = "/queue/fx.r5.q", "/queue/fx.r5.keep"
    seq, nxt = h3.counter()
    for r, cfg in enumerate(cfgs):
        b = run.broker(cfg); b.start()
        p = Stomp(PORT)
        for _ in range(100):
            d = Q if run.rng.random() < 0.85 else K
            live.add(d, run.send(p, d, nxt(d), size=mf.log_uniform_size(run.rng, 20, 4000))["fx_id"])
        p.disconnect()
        if r == 0:
            live.consume(Q, lambda x: x["seq"] % 5 != 0)
            live.consume(K, lambda x: x["seq"] == 2)
            time.sleep(3.0)
            b.stop(); run.broker_timings.append(b.timings)
            continue
        live.consume(Q, lambda x: True)
        time.sleep(0.33)
        h3.killed(run, b)
    return fr.finish(run, live, broker_config=["tools/" + c for c in cfgs],
                     scenario="24576-byte files, archiveDataLogs=true, checkpoint and GC every 300 ms, "
                              "compactAcksAfterNoGC=2; run1: 100 sends (85% fx.r5.q), 4 in 5 of q acked, keep seq 2 "
                              "acked, 3 s of GC, clean stop; run2: 100 sends, every message of q acked, SIGKILL 0.33 s "
                              "later (in a GC pass).")


ALL = {"r1": r1, "r2": r2, "r3": r3, "r4": r4, "r5": r5}

if __name__ == "__main__":
    for n in sys.argv[1:] or list(ALL):
        t = time.time()
        ALL[n]()
        print("  %s took %.1fs" % (n, time.time() - t))
