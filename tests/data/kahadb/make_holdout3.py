#!/usr/bin/env python3
"""Third set of hold-out KahaDB stores from the real ActiveMQ 5.17.2 broker (kl48 lane), shapes
/work/kahadb-fresh, /work/kahadb-holdout, /work/kahadb-holdout2 and tests/data/kahadb do not cover.

usage: make_holdout3.py [m1 m2]  ->  /work/kahadb-holdout3/<name>/{kahadb, manifest.json, broker.log}

Same bookkeeping as make_holdout2.py; broker on 127.0.0.1:61789 (STOMP only), stopped by PID.
"""
import os, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TMPDIR", "/tmp/kahaholdout3-tmp")
os.makedirs(os.environ["TMPDIR"], exist_ok=True)
import make_fresh as fr  # noqa: E402
import make_fixtures as mf  # noqa: E402
from stompfx import Stomp  # noqa: E402

PORT = 61789
fr.PORT = mf.PORT = PORT
mf.WORK = os.path.join(os.environ["TMPDIR"], "amq-holdout3")
mf.OUTROOT = os.path.dirname(fr.TOOLS)
kaha, Live, finish = fr.kaha, fr.Live, fr.finish


def config(name, adapter_xml, policy=None):
    c = fr.config(name, adapter_xml)
    if policy:
        path = os.path.join(fr.TOOLS, c)
        xml = open(path).read()
        xml = xml.replace("    <persistenceAdapter>", "    <destinationPolicy><policyMap><policyEntries>\n      %s\n"
                          "    </policyEntries></policyMap></destinationPolicy>\n    <persistenceAdapter>" % policy, 1)
        with open(path, "w") as fh:
            fh.write(xml)
    return c


def counter():
    """per-destination send sequence numbers: (the dict, next(dest))"""
    seq = {}

    def nxt(d):
        seq[d] = seq.get(d, 0) + 1
        return seq[d]
    return seq, nxt


def killed(run, b, *conns):
    b.kill9()
    run.ev("sigkill", pid=b.proc.pid)
    run.broker_timings.append(b.timings)
    for p in conns:
        try:
            p.sock.close()
        except Exception:
            pass


def burst(run, dests, n, seq, size_fn, stop):
    """sends without receipt from a thread until n are sent or stop is set (the kill lands mid-batch)"""
    p = Stomp(PORT)
    sent = []

    def go():
        for _ in range(n):
            if stop.is_set():
                return
            d = run.rng.choice(dests)
            seq[d] = seq.get(d, 0) + 1
            try:
                run.send(p, d, seq[d], receipt=False, size=size_fn())
            except Exception:
                return
            sent.append(d)
    t = threading.Thread(target=go, daemon=True)
    t.start()
    return p, t, sent


def drain(run, dest, n, ack_pred, tx=None, commit=True, timeout=15):
    """receive up to n from dest, ack those ack_pred accepts (in tx when given); returns (received, acked) fx_ids"""
    c = Stomp(PORT)
    c.subscribe(dest, "s1")
    frames = c.receive(n, timeout=timeout)
    if tx:
        c.begin(tx)
    got, acked = [], []
    for f in frames:
        rec = run.note_msg(f)
        got.append(rec["fx_id"])
        if ack_pred(rec):
            c.ack(f, tx=tx)
            acked.append(rec["fx_id"])
    if tx:
        (c.commit if commit else c.abort)(tx)
    c.disconnect()
    run.ev("consume", destination=dest, received=len(got), acked=len(acked), transaction=tx)
    return got, acked


def drain_expired(run, live, queue, dlq, expired):
    """receive what ``queue`` holds (its expired messages go to ``dlq`` at dispatch, the rest must come) and ack
    those of even seq; ``live`` then holds the rest on ``queue`` and ``expired`` on ``dlq``"""
    got, acked = drain(run, queue, len(live.q.get(queue, [])), lambda x: x["seq"] % 2 == 0)
    if sorted(got) != sorted(live.q.get(queue, [])):
        raise RuntimeError("ttl queue delivered %r, expected %r" % (got, live.q.get(queue)))
    live.q[queue] = [f for f in live.q[queue] if f not in set(acked)]
    live.q[dlq] = list(expired)


def send_ttl(run, p, live, dest, nxt, count, every, sizes, expired):
    """``count`` sends to ``dest`` on connection ``p``, all but every ``every``-th with expires=now+1.5 s: those
    are added to ``expired``, the others to ``live``"""
    for k in range(count):
        ttl = k % every != every - 1
        extra = {"expires": str(int(time.time() * 1000) + 1500)} if ttl else None
        m = run.send(p, dest, nxt(dest), size=run.rng.randint(*sizes), extra=extra)
        (expired.append if ttl else live.q.setdefault(dest, []).append)(m["fx_id"])


def open_acks(run, live, dest, n, tx):
    """a connection that received what ``dest`` holds and acks the first ``n`` in transaction ``tx``, left open"""
    c = Stomp(PORT)
    c.subscribe(dest, "s1")
    frames = c.receive(len(live.q.get(dest, [])), timeout=30)
    c.begin(tx)
    for f in frames[:n]:
        run.note_msg(f)
        c.ack(f, tx=tx)
    return c


def m1_small_files_ttl_kill():
    """64 KiB files (many), checkpoints and GC every second across two clean restarts; a queue whose first
    messages stay (pinning the oldest file); messages with a 1.5 s TTL left to expire while the broker is down
    and expired into ActiveMQ.DLQ by the next run's dispatch; then a run whose checkpoints go on while a burst
    of sends without receipt is SIGKILLed mid-batch"""
    run = mf.Run("m1-small-ttl-kill", 7648)
    opts = 'checkpointInterval="500" cleanupInterval="1000"'
    cfgs = [config("m1-run%d" % (r + 1), kaha(65536, opts)) for r in range(3)]
    live = Live(run)
    Q1, Q2, QT = "/queue/fx.m1.keep", "/queue/fx.m1.churn", "/queue/fx.m1.ttl"
    DLQ = "/queue/ActiveMQ.DLQ"
    seq = {}

    def nxt(d):
        seq[d] = seq.get(d, 0) + 1
        return seq[d]
    expired = []
    for r, cfg in enumerate(cfgs):
        b = run.broker(cfg); b.start()
        if r == 2:
            drain_expired(run, live, QT, DLQ, expired)
            p = Stomp(PORT)
            for _ in range(40):
                d = run.rng.choice((Q1, Q2))
                live.add(d, run.send(p, d, nxt(d), size=mf.log_uniform_size(run.rng, 20, 6000))["fx_id"])
            p.disconnect()
            live.consume(Q2, lambda x: x["seq"] % 4 != 3)
            time.sleep(1.2)  # a checkpoint after the acks
            stop = threading.Event()
            bp, bt, sent = burst(run, (Q1, Q2, QT), 400, seq, lambda: mf.log_uniform_size(run.rng, 50, 4000), stop)
            time.sleep(0.35)
            killed(run, b, bp)
            stop.set(); bt.join(5)
            run.ev("burst", attempted=len(sent))
            break
        p = Stomp(PORT)
        for _ in range(150):
            d = run.rng.choice((Q1, Q2, Q2))
            live.add(d, run.send(p, d, nxt(d), size=mf.log_uniform_size(run.rng, 20, 3000))["fx_id"])
        if r == 1:
            send_ttl(run, p, live, QT, nxt, 14, 3, (100, 900), expired)
        p.disconnect()
        live.consume(Q2, lambda x, r=r: x["seq"] % 5 != r)
        live.consume(Q1, lambda x: x["seq"] > 6 and x["seq"] % 3 == 0)
        time.sleep(2.5)  # GC passes free the files the acks emptied
        b.stop(); run.broker_timings.append(b.timings)
    return finish(run, live, broker_config=["tools/" + c for c in cfgs], expired_to_dlq=expired,
                  scenario="65536-byte files, checkpointInterval=500, cleanupInterval=1000; run1, run2: 150 sends "
                           "each to fx.m1.keep/fx.m1.churn, partial acks (fx.m1.keep seq 1-6 never), GC, clean stop; "
                           "run2 also 14 sends to fx.m1.ttl, 10 of them with expires=now+1.5 s; run3: subscribing "
                           "fx.m1.ttl expires the 10 into ActiveMQ.DLQ and delivers 4 (2 acked), 40 sends, acks, "
                           "a checkpoint, then a burst of up to 400 sends without receipt SIGKILLed after 0.35 s. "
                           "Sends of the burst are not in the live sets.")


def m2_vtopic_groups_kill():
    """256 KiB files; a virtual topic (VirtualTopic.fx.m2) with two consumer queues (Consumer.A acks in
    committed transactions, Consumer.B individually and partly) and a durable subscription; a queue of message
    groups (JMSXGroupID); an ack transaction left open at the kill; a clean run, then one SIGKILLed while two
    connections send without receipt"""
    run = mf.Run("m2-vtopic-groups-kill", 8648)
    cfgs = [config("m2-run1", kaha(262144, 'indexWriteBatchSize="30" checkpointInterval="800" cleanupInterval="1500"')),
            config("m2-run2", kaha(262144, 'indexWriteBatchSize="30"'))]
    live = Live(run)
    VT = "/topic/VirtualTopic.fx.m2"
    CA, CB = "/queue/Consumer.A.VirtualTopic.fx.m2", "/queue/Consumer.B.VirtualTopic.fx.m2"
    G = "/queue/fx.m2.groups"
    seq = {}

    def nxt(d):
        seq[d] = seq.get(d, 0) + 1
        return seq[d]
    for r, cfg in enumerate(cfgs):
        b = run.broker(cfg); b.start()
        if r == 0:
            fr.subscribe_durable(run, VT, "m2-d", "vd")
            for q in (CA, CB):  # consumer queues exist from their first subscription
                c = Stomp(PORT); c.subscribe(q, "s0"); c.disconnect()
        p = Stomp(PORT)
        for _ in range(120 if r == 0 else 60):
            if run.rng.random() < 0.55:
                m = run.send(p, VT, nxt(VT), size=mf.log_uniform_size(run.rng, 20, 8000))
                for k in (CA, CB, "vd"):
                    live.add(k, m["fx_id"])
            else:
                grp = "g%d" % run.rng.randint(1, 5)
                m = run.send(p, G, nxt(G), size=mf.log_uniform_size(run.rng, 20, 5000), extra={"JMSXGroupID": grp})
                live.add(G, m["fx_id"])
        p.disconnect()
        live.consume(CA, lambda x: True, tx="m2-a-%d" % r, commit=True)
        live.consume(CB, lambda x, r=r: x["seq"] % 3 != r)
        live.consume(VT, lambda x: x["seq"] % 2 == 0, client_id="m2-d", durable="vd", key="vd")
        live.consume(G, lambda x: x["seq"] % 4 in (0, 1))
        if r == 0:
            time.sleep(2.5)
            b.stop(); run.broker_timings.append(b.timings)
            continue
        c = open_acks(run, live, G, 6, "m2-open-acks")
        stop = threading.Event()
        size_fn = lambda: mf.log_uniform_size(run.rng, 50, 20000)  # noqa: E731
        bp, bt, sent = burst(run, (VT, G, CB), 300, seq, size_fn, stop)
        time.sleep(0.5)
        killed(run, b, bp, c)
        stop.set(); bt.join(5)
        run.ev("burst", attempted=len(sent))
    return finish(run, live, broker_config=["tools/" + c for c in cfgs],
                  scenario="262144-byte files, indexWriteBatchSize=30; virtual topic VirtualTopic.fx.m2 with "
                           "consumer queues Consumer.A (acks all in committed txs) and Consumer.B (partial acks) and "
                           "durable sub "
                           "m2-d/vd; fx.m2.groups with JMSXGroupID g1-g5; run1 (GC <1.5 s) 120 sends, clean stop; run2 "
                           "(default checkpoints) 60 sends, acks, an open tx acking 6 of fx.m2.groups, a burst of up "
                           "to 300 sends without receipt to VT/groups/Consumer.B SIGKILLed after 0.5 s. Burst sends "
                           "not in the live sets.")


ALL = {"m1": m1_small_files_ttl_kill, "m2": m2_vtopic_groups_kill}

if __name__ == "__main__":
    for n in sys.argv[1:] or list(ALL):
        t = time.time()
        ALL[n]()
        print("  %s took %.1fs" % (n, time.time() - t))
