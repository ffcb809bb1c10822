#!/usr/bin/env python3
"""Fifth set of hold-out KahaDB stores from the real ActiveMQ 5.17.2 broker (kl51 lane): fresh seeds and shapes
(20/24/40/96/12 KiB files; priority queues with compound selectors on durable subscriptions; rolled-back,
committed and open transactions of sends and acks; mKahaDB with a prefix filter and a catch-all; a virtual topic
with a selector subscription; journalDiskSyncStrategy=periodic, indexWriteBatchSize 10/200, GC between waves).

usage: PYTHONPATH=/work/shared/fixtures/kahadb/tools make_holdout5.py [q1 ...]
       ->  /work/kahadb-holdout5/<name>/{kahadb|mkahadb, manifest.json, broker.log}

Broker configs are written to a copy of the fixture tools under $TMPDIR, never into the shared fixtures.
Broker on 127.0.0.1:61716 (STOMP only), stopped by PID.
"""
import os, sys, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
os.environ.setdefault("TMPDIR", "/tmp/kl51")
os.makedirs(os.environ["TMPDIR"], exist_ok=True)
import make_fresh as fr  # noqa: E402
import make_fixtures as mf  # noqa: E402
import make_holdout3 as h3  # noqa: E402
from stompfx import Stomp  # noqa: E402

PORT = 61716
TOOLS = fr.isolate(PORT, "amq-holdout5", os.environ.get("HOLDOUT5", "/work/kahadb-holdout5"), h3)
NOCKPT = 'checkpointInterval="600000" cleanupInterval="600000"'


def send_props(run, p, live, dest, seq, subs, size, receipt=True, tx=None):
    """a topic send with ``color`` and numeric ``n`` properties, added to each subscription of ``subs``
    ((key, predicate(color, n))) it matches when it is confirmed outside a transaction"""
    color, n = run.rng.choice(("red", "blue", "green", "red")), run.rng.randint(0, 99)
    m = run.send(p, dest, seq, size=size, receipt=receipt, tx=tx, extra={"color": color, "n": str(n)})
    if receipt and tx is None:
        for key, pred in subs:
            if pred(color, n):
                live.add(key, m["fx_id"])
    return m


def q1():
    """20 KiB files, prioritizedMessages on fx.q1.>, indexWriteBatchSize=10; a topic with three durable
    subscriptions (compound selectors); run 1 with checkpoints and GC, an aborted ack transaction, clean stop;
    run 2 without checkpoints: an aborted send transaction, a committed ack transaction, an aborted ack
    transaction, an open ack transaction and a burst without receipt at the SIGKILL"""
    run = mf.Run("q1-prio-rollback-kill", 9581)
    pol = ('<policyEntry queue="fx.q1.>" prioritizedMessages="true"/>'
           '<policyEntry topic="fx.q1.>" prioritizedMessages="true"/>')
    cfgs = [h3.config("q1-run1", fr.kaha(20480, 'indexWriteBatchSize="10" checkpointInterval="700" '
                                                'cleanupInterval="1400"'), pol),
            h3.config("q1-run2", fr.kaha(20480, 'indexWriteBatchSize="10" ' + NOCKPT), pol)]
    live = fr.Live(run)
    P1, P2, T = "/queue/fx.q1.p1", "/queue/fx.q1.p2", "/topic/fx.q1.t"
    sels = {"hot": "n > 30 AND color <> 'green'", "rb": "color IN ('red', 'blue')", "all": None}
    subs = (("hot", lambda c, n: n > 30 and c != "green"), ("rb", lambda c, n: c in ("red", "blue")),
            ("all", lambda c, n: True))
    seq, nxt = h3.counter()
    txs = []
    for r, cfg in enumerate(cfgs):
        b = run.broker(cfg); b.start()
        if r == 0:
            for key, _p in subs:
                fr.subscribe_selected(run, T, "q1-" + key, key, sels[key])
        p = Stomp(PORT)
        for _ in range(110 if r == 0 else 45):
            d = run.rng.choice((P1, P1, P2, T))
            size = mf.log_uniform_size(run.rng, 20, 3500)
            if d == T:
                send_props(run, p, live, T, nxt(T), subs, size)
            else:
                live.add(d, run.send(p, d, nxt(d), size=size, extra={"priority": str(run.rng.randint(0, 9))})["fx_id"])
        p.disconnect()
        if r == 0:
            live.consume(P1, lambda x: x["seq"] % 3 != 1)
            live.consume(P2, lambda x: x["seq"] % 2 == 0, tx="q1-ack-p2-aborted", commit=False)
            fr.consume_selected(run, live, T, "hot", lambda x: True, "q1-hot", "hot", sels["hot"])
            fr.consume_selected(run, live, T, "all", lambda x: x["seq"] <= 40, "q1-all", "all", None)
            time.sleep(3.0)  # checkpoints and GC passes over the acknowledged files
            b.stop(); run.broker_timings.append(b.timings)
            continue
        p = Stomp(PORT)
        p.begin("q1-sends-aborted")
        ids = [run.send(p, P2, nxt(P2), size=700, tx="q1-sends-aborted", extra={"priority": "8"})["fx_id"]
               for _ in range(3)]
        p.abort("q1-sends-aborted")
        txs.append({"transaction": "q1-sends-aborted", "outcome": "abort", "fx_ids": ids})
        p.disconnect()
        live.consume(P1, lambda x: x["seq"] % 2 == 0, tx="q1-ack-p1-committed", commit=True)
        live.consume(P2, lambda x: True, tx="q1-ack-p2-aborted2", commit=False)
        fr.consume_selected(run, live, T, "rb", lambda x: x["seq"] % 3 == 0, "q1-rb", "rb", sels["rb"])
        c = h3.open_acks(run, live, P2, 4, "q1-open-acks")
        stop = threading.Event()
        bp, bt, sent = h3.burst(run, (P1, P2), 200, seq, lambda: mf.log_uniform_size(run.rng, 30, 2500), stop)
        time.sleep(0.25)
        h3.killed(run, b, bp, c)
        stop.set(); bt.join(5)
        run.ev("burst", attempted=len(sent))
    return fr.finish(run, live, broker_config=["tools/" + c for c in cfgs], transactions=txs,
                     scenario="20480-byte files, indexWriteBatchSize=10, prioritizedMessages on fx.q1.>; topic fx.q1.t "
                              "with durable subs hot (n > 30 AND color <> 'green'), rb (color IN ('red','blue')), all; "
                              "run1 (checkpoint 700 ms, GC 1.4 s): 110 sends, acks, an aborted ack tx on p2, clean "
                              "stop; run2 without checkpoints: 45 sends, an aborted send tx of 3, a committed ack tx "
                              "on p1, an aborted ack tx on p2, rb acks, an open tx acking 4 of p2, a burst of up to "
                              "200 sends without receipt, SIGKILL after 0.25 s. Burst sends are not in the live sets.")


def q2():
    """mKahaDB, 24 KiB files: queues fx.q2.a.> in a filtered store, everything else in a catch-all; three waves
    with GC between; STOMP transactions across both stores (commit, abort); SIGKILL during a burst"""
    run = mf.Run("q2-mkahadb-gc-kill", 9582)
    sub = ('<kahaDB journalMaxFileLength="24576" checksumJournalFiles="true" checkForCorruptJournalFiles="true" '
           'checkpointInterval="500" cleanupInterval="900" indexWriteBatchSize="40"/>')
    cfg = h3.config("q2", '<mKahaDB directory="${fx.data}/mkahadb" journalMaxFileLength="24576" '
                    'checkForCorruption="true"><filteredPersistenceAdapters>'
                    '<filteredKahaDB queue="fx.q2.a.>"><persistenceAdapter>%s</persistenceAdapter></filteredKahaDB>'
                    '<filteredKahaDB><persistenceAdapter>%s</persistenceAdapter></filteredKahaDB>'
                    '</filteredPersistenceAdapters></mKahaDB>' % (sub, sub))
    live = fr.Live(run)
    A1, A2, B = "/queue/fx.q2.a.one", "/queue/fx.q2.a.two", "/queue/fx.q2.b"
    T = "/topic/fx.q2.t"
    seq, nxt = h3.counter()
    txs = []
    b = run.broker(cfg); b.start()
    fr.subscribe_durable(run, T, "q2-d", "d")
    for wave in range(3):
        p = Stomp(PORT)
        for _ in range(70):
            d = run.rng.choice((A1, A1, A2, B, T))
            m = run.send(p, d, nxt(d), size=mf.log_uniform_size(run.rng, 40, 3000))
            live.add("d" if d == T else d, m["fx_id"])
        tx = "q2-tx-%d" % wave
        p.begin(tx)
        ids = [(d, run.send(p, d, nxt(d), size=run.rng.randint(100, 1200), tx=tx)["fx_id"]) for d in (A1, B, A2)]
        fr.settle(p, tx, wave != 1, ids, live, txs)
        p.disconnect()
        live.consume(A1, lambda x, w=wave: w < 2 or x["seq"] % 4 == 0)
        live.consume(B, lambda x: x["seq"] % 3 != 0)
        live.consume(T, lambda x, w=wave: x["seq"] % 2 == w % 2, client_id="q2-d", durable="d", key="d")
        time.sleep(2.0)
    stop = threading.Event()
    bp, bt, sent = h3.burst(run, (A1, A2, B), 250, seq, lambda: mf.log_uniform_size(run.rng, 30, 2000), stop)
    time.sleep(0.3)
    h3.killed(run, b, bp)
    stop.set(); bt.join(5)
    run.ev("burst", attempted=len(sent))
    return fr.finish(run, live, store="mkahadb", broker_config="tools/" + cfg, transactions=txs,
                     scenario="mKahaDB, 24576-byte files, every child with checkpoint 500 ms, GC 900 ms, "
                              "indexWriteBatchSize=40: fx.q2.a.> filtered, the rest in a catch-all; a durable sub "
                              "q2-d/d on fx.q2.t; 3 waves of 70 sends + a cross-store send tx (committed, aborted, "
                              "committed), fx.q2.a.one fully acked in waves 0-1, partial acks elsewhere, 2 s GC waits; "
                              "a burst of up to 250 sends without receipt SIGKILLed after 0.3 s (not in live sets).")


def q3():
    """40 KiB files, journalDiskSyncStrategy=periodic, indexWriteBatchSize=200, checkpoints and GC; a virtual
    topic with two consumer queues and a durable subscription with a selector on the virtual topic, a plain
    queue; two clean runs (a healthy store)"""
    run = mf.Run("q3-vtopic-periodic-clean", 9583)
    opts = ('journalDiskSyncStrategy="periodic" indexWriteBatchSize="200" checkpointInterval="900" '
            'cleanupInterval="1800"')
    cfgs = [h3.config("q3-run%d" % (r + 1), fr.kaha(40960, opts)) for r in range(2)]
    live = fr.Live(run)
    VT, Q = "/topic/VirtualTopic.fx.q3", "/queue/fx.q3.q"
    CA, CB = "/queue/Consumer.A.VirtualTopic.fx.q3", "/queue/Consumer.B.VirtualTopic.fx.q3"
    subs = (("blue", lambda c, n: c == "blue"),)
    seq, nxt = h3.counter()
    for r, cfg in enumerate(cfgs):
        b = run.broker(cfg); b.start()
        if r == 0:
            fr.subscribe_selected(run, VT, "q3-blue", "blue", "color = 'blue'")
            for q in (CA, CB):
                c = Stomp(PORT); c.subscribe(q, "s0"); c.disconnect()
        p = Stomp(PORT)
        for _ in range(130 if r == 0 else 80):
            d = run.rng.choice((VT, VT, Q))
            size = mf.log_uniform_size(run.rng, 20, 7000)
            if d == VT:
                m = send_props(run, p, live, VT, nxt(VT), subs, size)
                for k in (CA, CB):
                    live.add(k, m["fx_id"])
            else:
                live.add(Q, run.send(p, Q, nxt(Q), size=size)["fx_id"])
        p.disconnect()
        live.consume(CA, lambda x, r=r: x["seq"] % 2 == r)
        live.consume(CB, lambda x: x["seq"] % 5 != 0, tx="q3-b-%d" % r, commit=True)
        live.consume(Q, lambda x, r=r: r == 0 or x["seq"] % 3 == 0)
        fr.consume_selected(run, live, VT, "blue", lambda x: x["seq"] % 4 != 1, "q3-blue", "blue", "color = 'blue'")
        time.sleep(2.5)
        b.stop(); run.broker_timings.append(b.timings)
    return fr.finish(run, live, broker_config=["tools/" + c for c in cfgs],
                     scenario="40960-byte files, journalDiskSyncStrategy=periodic, indexWriteBatchSize=200, checkpoint "
                              "900 ms, GC 1.8 s; VirtualTopic.fx.q3 with Consumer.A / Consumer.B queues and durable "
                              "sub "
                              "q3-blue/blue (color = 'blue'), queue fx.q3.q; run1 130 sends, run2 80, acks (Consumer.B "
                              "in committed txs), GC waits, two clean stops.")


def q4():
    """96 KiB files, bodies 4-40 KiB (a few records per file), many send transactions committed and aborted with
    plain sends inside their span, ack transactions; no checkpoint after the start; SIGKILL right after a
    committed ack transaction, nothing in flight"""
    run = mf.Run("q4-big-tx-kill", 9584)
    cfg = h3.config("q4", fr.kaha(98304, 'enableIndexWriteAsync="true" ' + NOCKPT))
    live = fr.Live(run)
    A, B = "/queue/fx.q4.a", "/queue/fx.q4.b"
    seq, nxt = h3.counter()
    txs = []
    b = run.broker(cfg); b.start()
    p = Stomp(PORT)
    for t in range(14):
        tx = "q4-tx-%d" % t
        commit = run.rng.random() < 0.55
        p.begin(tx)
        ids = []
        for _ in range(run.rng.randint(1, 4)):
            d = run.rng.choice((A, B))
            ids.append((d, run.send(p, d, nxt(d), tx=tx, size=run.rng.randint(4000, 40000))["fx_id"]))
            if run.rng.random() < 0.5:
                d = run.rng.choice((A, B))
                live.add(d, run.send(p, d, nxt(d), size=mf.log_uniform_size(run.rng, 50, 20000))["fx_id"])
        fr.settle(p, tx, commit, ids, live, txs)
        if t % 5 == 4:
            p.disconnect()
            live.consume(A, lambda x, t=t: x["seq"] % 3 == t % 3, tx="q4-ack-a-%d" % t, commit=True)
            live.consume(B, lambda x: x["seq"] % 2 == 0, tx="q4-ack-b-%d" % t, commit=False)
            p = Stomp(PORT)
    p.disconnect()
    live.consume(B, lambda x: x["seq"] % 4 == 1, tx="q4-ack-b-last", commit=True)
    h3.killed(run, b)
    return fr.finish(run, live, broker_config="tools/" + cfg, transactions=txs,
                     scenario="98304-byte files, enableIndexWriteAsync=true, no checkpoint after start; 14 send txs "
                              "(random commit/abort) of 4-40 KB bodies with plain sends inside; every 5th: a committed "
                              "ack tx on A and an aborted one on B; a committed ack tx on B, then SIGKILL.")


def q5():
    """12 KiB files (records often cross most of a file), GC every 0.6 s over two clean runs, a third run
    SIGKILLed right after one send and one ack (a short tail after the last checkpoint)"""
    run = mf.Run("q5-tiny-files-gc-kill", 9585)
    cfgs = [h3.config("q5-run%d" % (r + 1), fr.kaha(12288, 'checkpointInterval="600" cleanupInterval="600" '
                                                           'indexCacheSize="8"')) for r in range(3)]
    live = fr.Live(run)
    Q, K = "/queue/fx.q5.q", "/queue/fx.q5.keep"
    seq, nxt = h3.counter()
    for r, cfg in enumerate(cfgs):
        b = run.broker(cfg); b.start()
        p = Stomp(PORT)
        if r == 2:
            time.sleep(1.5)  # a checkpoint of the restart
            live.add(Q, run.send(p, Q, nxt(Q), size=900)["fx_id"])
            p.disconnect()
            live.consume(K, lambda x: x["seq"] == 3)
            h3.killed(run, b)
            break
        for _ in range(90):
            d = Q if run.rng.random() < 0.8 else K
            live.add(d, run.send(p, d, nxt(d), size=mf.log_uniform_size(run.rng, 20, 2500))["fx_id"])
        p.disconnect()
        live.consume(Q, lambda x, r=r: x["seq"] % 7 != r)
        live.consume(K, lambda x: x["seq"] % 2 == 0 and x["seq"] > 4)
        time.sleep(2.0)
        b.stop(); run.broker_timings.append(b.timings)
    return fr.finish(run, live, broker_config=["tools/" + c for c in cfgs],
                     scenario="12288-byte files, checkpoint and GC every 600 ms, indexCacheSize=8; run1/run2: 90 sends "
                              "(80% fx.q5.q), most of fx.q5.q acked, even seq > 4 of fx.q5.keep acked, GC, clean stop; "
                              "run3: a send and the ack of fx.q5.keep seq 3 after the restart checkpoint, SIGKILL.")


ALL = {"q1": q1, "q2": q2, "q3": q3, "q4": q4, "q5": q5}

if __name__ == "__main__":
    for n in sys.argv[1:] or list(ALL):
        t = time.time()
        ALL[n]()
        print("  %s took %.1fs" % (n, time.time() - t))
