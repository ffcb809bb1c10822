#!/usr/bin/env python3
"""Second set of hold-out KahaDB stores from the real ActiveMQ 5.17.2 broker (kl46 lane), shapes
/work/kahadb-fresh f1..f13 and /work/kahadb-holdout h1..h4 do not cover.

usage: make_holdout2.py [k1 k2 k3]  ->  /work/kahadb-holdout2/<name>/{kahadb|mkahadb, manifest.json, broker.log}

Same bookkeeping as make_holdout.py (copied here); broker on 127.0.0.1:61797 (STOMP only), stopped by PID.
"""
import os, re, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TMPDIR", "/tmp/kahaholdout2-tmp")
os.makedirs(os.environ["TMPDIR"], exist_ok=True)
import make_fresh as fr  # noqa: E402
import make_fixtures as mf  # noqa: E402
from stompfx import Stomp  # noqa: E402

PORT = 61797
fr.PORT = mf.PORT = PORT
mf.WORK = os.path.join(os.environ["TMPDIR"], "amq-holdout2")
mf.OUTROOT = os.path.dirname(fr.TOOLS)
kaha, Live, finish = fr.kaha, fr.Live, fr.finish


def config(name, adapter_xml, policy=None):
    """fr.config, plus a <destinationPolicy> of the given policy entries"""
    c = fr.config(name, adapter_xml)
    if policy:
        path = os.path.join(fr.TOOLS, c)
        xml = open(path).read()
        xml = xml.replace("    <persistenceAdapter>", "    <destinationPolicy><policyMap><policyEntries>\n      %s\n"
                          "    </policyEntries></policyMap></destinationPolicy>\n    <persistenceAdapter>" % policy, 1)
        with open(path, "w") as fh:
            fh.write(xml)
    return c


def killed(run, b, p):
    time.sleep(0.02)
    b.kill9()
    run.ev("sigkill", pid=b.proc.pid)
    run.broker_timings.append(b.timings)
    try:
        p.sock.close()
    except Exception:
        pass


def k1_big_bodies_nosync_kill():
    """128 KiB files, bodies of 50-300 KiB between small ones (many records longer than a file), no disk
    syncs (enableJournalDiskSyncs=false), GC every second; a clean run, then a killed one"""
    run = mf.Run("k1-big-nosync-kill", 7646)
    opts = 'enableJournalDiskSyncs="false" checkpointInterval="500" cleanupInterval="1000"'
    cfgs = [config("k1-run1", kaha(131072, opts)),
            config("k1-run2", kaha(131072, 'enableJournalDiskSyncs="false" checkpointInterval="600000" '
                                           'cleanupInterval="600000"'))]
    live = Live(run)
    Q, B, T = "/queue/fx.k1.q", "/queue/fx.k1.big", "/topic/fx.k1.t"
    seq = {Q: 0, B: 0, T: 0}

    def size_for(d):
        return run.rng.randint(50 * 1024, 300 * 1024) if d == B or run.rng.random() < 0.25 else \
            mf.log_uniform_size(run.rng, 20, 3000)
    for r, cfg in enumerate(cfgs):
        b = run.broker(cfg); b.start()
        if r == 0:
            fr.subscribe_durable(run, T, "k1-d", "kd")
        p = Stomp(PORT)
        for _ in range(40 if r == 0 else 25):
            d = run.rng.choice((Q, Q, B, T))
            seq[d] += 1
            f = run.send(p, d, seq[d], size=size_for(d))["fx_id"]
            live.add("kd" if d == T else d, f)
        p.disconnect()
        live.consume(Q, lambda x, r=r: x["seq"] % 3 != r)
        live.consume(B, lambda x: x["seq"] % 2 == 0)
        live.consume(T, lambda x: x["seq"] % 4 != 1, client_id="k1-d", durable="kd", key="kd")
        if r == 0:
            time.sleep(2.5)  # GC passes free the big files
            b.stop(); run.broker_timings.append(b.timings)
            continue
        p = Stomp(PORT)
        for _ in range(4):
            seq[B] += 1
            run.send(p, B, seq[B], receipt=False, size=run.rng.randint(60 * 1024, 200 * 1024))
        killed(run, b, p)
    return finish(run, live, broker_config=["tools/" + c for c in cfgs],
                  scenario="128 KiB files, enableJournalDiskSyncs=false; fx.k1.big bodies 50-300 KiB and 1/4 of "
                           "the others too; run1 GC/checkpoint <1 s, partial acks, clean stop; run2 no checkpoints, "
                           "25 sends, partial acks, 4 big sends without receipt, SIGKILL.")


def k2_priority_subs_kill():
    """prioritizedMessages=true queues (explicit priorities 0-9), a topic with six durable subscriptions
    (four with selectors) acked partly, concurrentStoreAndDispatchQueues=false, 48 KiB files,
    indexWriteBatchSize 25; killed with a local ack transaction open and a send transaction committed"""
    run = mf.Run("k2-priority-subs-kill", 8646)
    pol = '<policyEntry queue="fx.k2.>" prioritizedMessages="true"/><policyEntry topic="fx.k2.>" prioritizedMessages="true"/>'
    opts = ('concurrentStoreAndDispatchQueues="false" indexWriteBatchSize="25" checkpointInterval="700" '
            'cleanupInterval="1400"')
    cfgs = [config("k2-run1", kaha(49152, opts), pol),
            config("k2-run2", kaha(49152, 'concurrentStoreAndDispatchQueues="false" indexWriteBatchSize="25" '
                                          'checkpointInterval="600000" cleanupInterval="600000"'), pol)]
    live = Live(run)
    P1, P2, T = "/queue/fx.k2.p1", "/queue/fx.k2.p2", "/topic/fx.k2.t"
    subs = (("red", "red"), ("all", None), ("blue", "blue"), ("red2", "red"), ("green", "green"), ("all2", None))
    sel = {"red": "color = 'red'", "all": None, "blue": "color = 'blue'", "red2": "color = 'red'",
           "green": "color = 'green'", "all2": None}
    seq = {P1: 0, P2: 0, T: 0}
    for r, cfg in enumerate(cfgs):
        b = run.broker(cfg); b.start()
        if r == 0:
            for key, _c in subs:
                fr.subscribe_selected(run, T, "k2-" + key, key, sel[key])
        p = Stomp(PORT)
        for _ in range(90 if r == 0 else 50):
            d = run.rng.choice((P1, P1, P2, T, T))
            seq[d] += 1
            size = mf.log_uniform_size(run.rng, 20, 4000)
            if d == T:
                fr.send_colored(run, p, live, T, seq[T], subs, size)
            else:
                live.add(d, run.send(p, d, seq[d], size=size, extra={"priority": str(run.rng.randint(0, 9))})["fx_id"])
        p.disconnect()
        live.consume(P1, lambda x, r=r: x["seq"] % 3 == r)
        live.consume(P2, lambda x: x["seq"] % 2 == 1, tx="k2-ack-p2-%d" % r, commit=(r == 0))
        for key, _c in subs:
            pred = {"red": lambda x: True, "all": lambda x, r=r: x["seq"] % 3 != r, "blue": lambda x: x["seq"] % 2 == 0,
                    "green": lambda x: False, "red2": lambda x: x["seq"] < 30, "all2": lambda x: x["seq"] % 5 == 0}[key]
            fr.consume_selected(run, live, T, key, pred, "k2-" + key, key, sel[key])
        if r == 0:
            time.sleep(2.5)
            b.stop(); run.broker_timings.append(b.timings)
            continue
        p = Stomp(PORT)
        p.begin("k2-sends")
        ids = []
        for d in (P1, P2, P1):
            seq[d] += 1
            ids.append((d, run.send(p, d, seq[d], size=800, tx="k2-sends", extra={"priority": "9"})["fx_id"]))
        p.commit("k2-sends")
        for d, f in ids:
            live.add(d, f)
        p.disconnect()
        c = Stomp(PORT)
        c.subscribe(P1, "s1")
        frames = c.receive(len(live.q.get(P1, [])), timeout=30)
        c.begin("k2-open-acks")
        for f in frames[:5]:
            run.note_msg(f)
            c.ack(f, tx="k2-open-acks")
        p = Stomp(PORT)
        for _ in range(10):
            seq[T] += 1
            fr.send_colored(run, p, live, T, seq[T], subs, run.rng.randint(100, 1500), receipt=False)
        killed(run, b, p)
        try:
            c.sock.close()
        except Exception:
            pass
    return finish(run, live, broker_config=["tools/" + c for c in cfgs],
                  scenario="prioritizedMessages=true on fx.k2.> (queues and topic), explicit priorities 0-9; 49152-byte "
                           "files, concurrentStoreAndDispatchQueues=false, indexWriteBatchSize=25; topic with 6 durable "
                           "subs (4 selectors) acked partly; run1 GC <1.5 s, clean stop; run2 no checkpoints, a "
                           "committed send tx (priority 9), an open tx acking 5 of p1, 10 topic sends without receipt, "
                           "SIGKILL.")


def k3_mkahadb_prefix_kill():
    """mKahaDB with a filtered adapter per queue prefix (fx.k3.a.>, fx.k3.b.>) and a perDestination
    catch-all, 24 KiB files; cross-store transactions; a clean run then a killed one"""
    run = mf.Run("k3-mkahadb-prefix-kill", 7656)

    def mk(extra):
        sub = ('<kahaDB journalMaxFileLength="24576" checksumJournalFiles="true" checkForCorruptJournalFiles="true" '
               '%s/>' % extra)
        fil = ''.join('<filteredKahaDB queue="%s"><persistenceAdapter>%s</persistenceAdapter></filteredKahaDB>'
                      % (q, sub) for q in ("fx.k3.a.>", "fx.k3.b.>"))
        fil += '<filteredKahaDB><persistenceAdapter>%s</persistenceAdapter></filteredKahaDB>' % sub
        return ('<mKahaDB directory="${fx.data}/mkahadb" journalMaxFileLength="24576" checkForCorruption="true">'
                '<filteredPersistenceAdapters>%s</filteredPersistenceAdapters></mKahaDB>' % fil)
    cfgs = [config("k3-run1", mk('cleanupInterval="1000" checkpointInterval="500"')),
            config("k3-run2", mk('checkpointInterval="600000" cleanupInterval="600000"'))]
    live = Live(run)
    Qs = ["/queue/fx.k3.a.%d" % i for i in range(3)] + ["/queue/fx.k3.b.%d" % i for i in range(3)] + \
         ["/queue/fx.k3.other"]
    T = "/topic/fx.k3.t"
    dests = Qs + [T]
    seq = {}
    txs = []
    for r, cfg in enumerate(cfgs):
        b = run.broker(cfg); b.start()
        if r == 0:
            fr.subscribe_durable(run, T, "k3-d", "sd")
        p = Stomp(PORT)
        for _ in range(80):
            d = run.rng.choice(dests)
            seq[d] = seq.get(d, 0) + 1
            live.add("sd" if d == T else d, run.send(p, d, seq[d], size=mf.log_uniform_size(run.rng, 10, 3000))["fx_id"])
        for k in range(3):
            tx = "k3-tx-%d-%d" % (r + 1, k)
            commit = k != 1
            p.begin(tx)
            ids = []
            for d in run.rng.sample(dests, 4):
                seq[d] = seq.get(d, 0) + 1
                ids.append((d, run.send(p, d, seq[d], size=700, tx=tx)["fx_id"]))
            (p.commit if commit else p.abort)(tx)
            if commit:
                for d, f in ids:
                    live.add("sd" if d == T else d, f)
            txs.append({"transaction": tx, "outcome": "commit" if commit else "abort", "fx_ids": [f for _, f in ids]})
        p.disconnect()
        for i, q in enumerate(Qs):
            if (i + r) % 2 == 0:
                live.consume(q, lambda x, r=r: x["seq"] % 3 != r)
        live.consume(Qs[1], lambda x: True, tx="k3-ack-%d" % r, commit=(r == 0))
        live.consume(T, lambda x, r=r: x["seq"] % 3 == r, client_id="k3-d", durable="sd", key="sd")
        if r == 0:
            time.sleep(2.5)
            b.stop(); run.broker_timings.append(b.timings)
            continue
        p = Stomp(PORT)
        p.begin("k3-last")
        for d in (Qs[0], Qs[4], Qs[6], T):
            seq[d] = seq.get(d, 0) + 1
            run.send(p, d, seq[d], size=500, tx="k3-last")
        p.commit("k3-last")
        for _ in range(12):
            d = run.rng.choice(Qs)
            seq[d] = seq.get(d, 0) + 1
            run.send(p, d, seq[d], receipt=False, size=run.rng.randint(100, 1500))
        killed(run, b, p)
    return finish(run, live, store="mkahadb", broker_config=["tools/" + c for c in cfgs], transactions=txs,
                  scenario="mKahaDB: filteredKahaDB queue=fx.k3.a.> and queue=fx.k3.b.> (one store per prefix) and a "
                           "perDestination catch-all (fx.k3.other, the topic), 24 KiB files; 2 runs of 80 sends, 3 "
                           "cross-store txs (one aborted), partial acks, an ack tx (committed in run1, aborted in "
                           "run2); run1 GC <1 s, clean stop; run2 no checkpoints, a committed cross-store tx, 12 "
                           "sends without receipt, SIGKILL.")


def k4_big_small_kill():
    """a small store for the repository's tests: 128 KiB files, two records longer than 64 KiB (one before the
    clean stop's checkpoint, one after it in an older file), a few small ones, SIGKILL"""
    run = mf.Run("k4-big-small-kill", 7666)
    cfgs = [config("k4-run1", kaha(131072)), config("k4-run2", kaha(131072, 'checkpointInterval="600000" '
                                                                             'cleanupInterval="600000"'))]
    live = Live(run)
    Q = "/queue/fx.k4.q"
    n = 0
    for r, cfg in enumerate(cfgs):
        b = run.broker(cfg); b.start()
        p = Stomp(PORT)
        for size in ((300, 80 * 1024, 500) if r == 0 else (90 * 1024, 700, 70 * 1024, 400)):
            n += 1
            live.add(Q, run.send(p, Q, n, size=size)["fx_id"])
        p.disconnect()
        if r == 0:
            b.stop(); run.broker_timings.append(b.timings)
            continue
        live.consume(Q, lambda x: x["seq"] == 7)
        killed(run, b, Stomp(PORT))
    return finish(run, live, broker_config=["tools/" + c for c in cfgs],
                  scenario="128 KiB files; run1: 3 sends (300 B, 80 KiB, 500 B), clean stop; run2 without "
                           "checkpoints: 4 sends (90 KiB, 700 B, 70 KiB, 400 B), the last acked, SIGKILL.")


def k5_rollback_kill():
    """a small store for the repository's tests: 16 KiB files; a clean run, then one without checkpoints with a
    transaction of sends and one of acks both rolled back, a committed one, SIGKILL"""
    run = mf.Run("k5-rollback-kill", 7676)
    cfgs = [config("k5-run1", kaha(16384)), config("k5-run2", kaha(16384, 'checkpointInterval="600000" '
                                                                          'cleanupInterval="600000"'))]
    live = Live(run)
    Q = "/queue/fx.k5.q"
    n = 0
    txs = []
    for r, cfg in enumerate(cfgs):
        b = run.broker(cfg); b.start()
        p = Stomp(PORT)
        for _ in range(6):
            n += 1
            live.add(Q, run.send(p, Q, n, size=run.rng.randint(200, 900))["fx_id"])
        if r == 0:
            p.disconnect()
            b.stop(); run.broker_timings.append(b.timings)
            continue
        for tx, commit in (("k5-sends-aborted", False), ("k5-sends-committed", True)):
            p.begin(tx)
            ids = []
            for _ in range(2):
                n += 1
                ids.append(run.send(p, Q, n, size=600, tx=tx)["fx_id"])
            (p.commit if commit else p.abort)(tx)
            if commit:
                for f in ids:
                    live.add(Q, f)
            txs.append({"transaction": tx, "outcome": "commit" if commit else "abort", "fx_ids": ids})
        p.disconnect()
        live.consume(Q, lambda x: x["seq"] in (2, 3), tx="k5-acks-aborted", commit=False)
        live.consume(Q, lambda x: x["seq"] == 4)
        p = Stomp(PORT)
        n += 1
        live.add(Q, run.send(p, Q, n, size=300)["fx_id"])
        killed(run, b, p)
    return finish(run, live, broker_config=["tools/" + c for c in cfgs], transactions=txs,
                  scenario="16 KiB files; run1: 6 sends, clean stop; run2 without checkpoints: 6 sends, a transaction "
                           "of 2 sends aborted, one of 2 sends committed, a transaction acking seq 2-3 aborted, seq 4 "
                           "acked, 1 send, SIGKILL.")


def k6_acked_after_kill():
    """a small store for the repository's tests: 16 KiB files; 3 sends and a clean stop, then a run without
    checkpoints that acks all three, sends 2 more, and is SIGKILLed: every message the index holds at its
    checkpoint is acknowledged after it"""
    run = mf.Run("k6-acked-after-kill", 7686)
    cfgs = [config("k6-run1", kaha(16384)), config("k6-run2", kaha(16384, 'checkpointInterval="600000" '
                                                                          'cleanupInterval="600000"'))]
    live = Live(run)
    Q = "/queue/fx.k6.q"
    for r, cfg in enumerate(cfgs):
        b = run.broker(cfg); b.start()
        if r == 1:
            live.consume(Q, lambda x: True)
        p = Stomp(PORT)
        for k in range(3 if r == 0 else 2):
            n = 3 * r + k + 1
            live.add(Q, run.send(p, Q, n, size=run.rng.randint(200, 900))["fx_id"])
        if r == 0:
            p.disconnect()
            b.stop(); run.broker_timings.append(b.timings)
            continue
        killed(run, b, p)
    return finish(run, live, broker_config=["tools/" + c for c in cfgs],
                  scenario="16 KiB files; run1: 3 sends, clean stop; run2 without checkpoints: the 3 acked, 2 sends, "
                           "SIGKILL.")


def k7_batched_nosync_kill():
    """a small store for the repository's tests: 16 KiB files, no disk syncs (the journal batches writes that
    arrive together); a clean run, then one without checkpoints: queue and topic sends without receipt in
    bursts, the queue's acked, SIGKILL"""
    run = mf.Run("k7-batched-nosync-kill", 7696)
    cfgs = [config("k7-run1", kaha(16384, 'enableJournalDiskSyncs="false"')),
            config("k7-run2", kaha(16384, 'enableJournalDiskSyncs="false" checkpointInterval="600000" '
                                          'cleanupInterval="600000"'))]
    live = Live(run)
    Q, T = "/queue/fx.k7.q", "/topic/fx.k7.t"
    seq = {Q: 0, T: 0}
    for r, cfg in enumerate(cfgs):
        b = run.broker(cfg); b.start()
        if r == 0:
            fr.subscribe_durable(run, T, "k7-d", "kd")
        p, p2 = Stomp(PORT), Stomp(PORT)
        for _ in range(2 if r == 0 else 20):
            for conn, d in ((p, Q), (p2, T)):
                seq[d] += 1
                run.send(conn, d, seq[d], receipt=False, size=run.rng.randint(200, 700))
        for conn in (p, p2):  # (a receipt: all sent)
            conn.request("SEND", {"destination": "/queue/fx.k7.flush", "persistent": "true"}, b"x")
            conn.disconnect()
        if r == 0:
            b.stop(); run.broker_timings.append(b.timings)
            continue
        c = Stomp(PORT)
        c.subscribe(Q, "s1")
        for f in c.receive(seq[Q], timeout=30):
            run.note_msg(f)
            c.ack(f)
        c.disconnect()
        killed(run, b, Stomp(PORT))
    return finish(run, live, broker_config=["tools/" + c for c in cfgs],
                  scenario="16 KiB files, enableJournalDiskSyncs=false; durable sub k7-d/kd on fx.k7.t; run1: 4 sends "
                           "without receipt to fx.k7.q / fx.k7.t, clean stop; run2 without checkpoints: 40 sends "
                           "without receipt, every fx.k7.q message acked, SIGKILL. manifest live sets not kept "
                           "(sends without receipt).")


ALL = {"k7": k7_batched_nosync_kill, "k6": k6_acked_after_kill, "k5": k5_rollback_kill, "k4": k4_big_small_kill, "k1": k1_big_bodies_nosync_kill, "k2": k2_priority_subs_kill, "k3": k3_mkahadb_prefix_kill}

if __name__ == "__main__":
    for n in sys.argv[1:] or list(ALL):
        t = time.time()
        ALL[n]()
        print("  %s took %.1fs" % (n, time.time() - t))
