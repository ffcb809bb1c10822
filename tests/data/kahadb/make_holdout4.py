#!/usr/bin/env python3
"""Fourth set of hold-out KahaDB stores from the real ActiveMQ 5.17.2 broker (kl49 lane): make_holdout3's
shapes with other seeds and file sizes, plus a shape none covers (many small destinations, selector durable
subscriptions, TTL, 32 KiB files with GC across restarts, a local transaction left open at a SIGKILL).

usage: make_holdout4.py [n1 n2 n3]  ->  /work/kahadb-holdout4/<name>/{kahadb, manifest.json, broker.log}

Broker configs are written to a copy of the fixture tools under $TMPDIR, never into the shared fixtures.
Broker on 127.0.0.1:61791 (STOMP only), stopped by PID.
"""
import os, sys, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
os.environ.setdefault("TMPDIR", "/tmp/kl49")
os.makedirs(os.environ["TMPDIR"], exist_ok=True)
import make_fresh as fr  # noqa: E402
import make_fixtures as mf  # noqa: E402
import make_holdout3 as h3  # noqa: E402
from stompfx import Stomp  # noqa: E402

PORT = 61791
TOOLS = fr.isolate(PORT, "amq-holdout4", os.environ.get("HOLDOUT4", "/work/kahadb-holdout4"), h3)
_Run = mf.Run


def reseeded(shape, name, seed, length):
    """runs make_holdout3's shape under another name, seed and journal file length"""
    mf.Run = lambda _name, _seed: _Run(name, seed)
    h3.kaha = lambda _length, extra="": fr.kaha(length, extra)
    try:
        return h3.ALL[shape]()
    finally:
        mf.Run, h3.kaha = _Run, fr.kaha


def n1():
    return reseeded("m1", "n1-small-ttl-kill", 9471, 32768)


def n2():
    return reseeded("m2", "n2-vtopic-groups-kill", 9472, 131072)


def n3():
    """32 KiB files, checkpoints and GC every ~0.6 s, three runs (two clean stops, then a SIGKILL); 24 small
    queues, a topic with four durable subscriptions (selectors on a color and on a numeric property, one matching
    nothing); a TTL queue expiring into the DLQ between runs; in the last run a STOMP transaction holding sends
    and acks is left open at the kill, and a burst of sends without receipt is in flight"""
    run = mf.Run("n3-many-dests-kill", 9473)
    opts = 'checkpointInterval="600" cleanupInterval="600" indexWriteBatchSize="50"'
    cfgs = [h3.config("n3-run%d" % (r + 1), fr.kaha(32768, opts)) for r in range(3)]
    live = fr.Live(run)
    QS = ["/queue/fx.n3.q%02d" % i for i in range(24)]
    T, QT, DLQ = "/topic/fx.n3.t", "/queue/fx.n3.ttl", "/queue/ActiveMQ.DLQ"
    subs = (("red", "color = 'red'"), ("big", "n > 50"), ("all", None), ("none", "color = 'purple'"))
    seq = {}
    expired = []

    def nxt(d):
        seq[d] = seq.get(d, 0) + 1
        return seq[d]

    def matches(key, color, n):
        return {"red": color == "red", "big": n > 50, "all": True, "none": False}[key]

    def send_topic(p, receipt=True, tx=None):
        color = run.rng.choice(("red", "blue", "green"))
        n = run.rng.randint(0, 100)
        m = run.send(p, T, nxt(T), size=mf.log_uniform_size(run.rng, 20, 2000), receipt=receipt, tx=tx,
                     extra={"color": color, "n": str(n)})
        return m, color, n

    for r, cfg in enumerate(cfgs):
        b = run.broker(cfg); b.start()
        if r == 0:
            for key, sel in subs:
                fr.subscribe_selected(run, T, "n3-" + key, key, sel)
        if r == 2:
            got, acked = h3.drain(run, QT, len(live.q.get(QT, [])), lambda x: x["seq"] % 2 == 1)
            live.q[QT] = [f for f in live.q.get(QT, []) if f not in set(acked)]
            live.q[DLQ] = list(expired)
        p = Stomp(PORT)
        for _ in range(220 if r < 2 else 80):
            if run.rng.random() < 0.35:
                m, color, n = send_topic(p)
                for key, _s in subs:
                    if matches(key, color, n):
                        live.add(key, m["fx_id"])
            else:
                d = run.rng.choice(QS)
                live.add(d, run.send(p, d, nxt(d), size=mf.log_uniform_size(run.rng, 20, 1500))["fx_id"])
        if r == 1:
            h3.send_ttl(run, p, live, QT, nxt, 12, 4, (50, 600), expired)
        p.disconnect()
        for i, d in enumerate(QS):
            if (i + r) % 3 == 0:
                live.consume(d, lambda x, i=i: x["seq"] % 2 == i % 2)
        for key, sel in subs[:3]:
            if key == "all" and r == 0:
                continue
            fr.consume_selected(run, live, T, key, lambda x, r=r: x["seq"] % 3 != r, "n3-" + key, key, sel)
        time.sleep(1.5)  # checkpoints and GC over the acknowledged files
        if r < 2:
            b.stop(); run.broker_timings.append(b.timings)
            continue
        # the last run: an open local transaction with sends and acks, and a burst, at the kill
        c = h3.open_acks(run, live, QS[5], 4, "n3-open")
        for _ in range(6):  # a STOMP transaction belongs to its connection
            d = run.rng.choice(QS)
            run.send(c, d, nxt(d), size=run.rng.randint(50, 900), tx="n3-open")
        stop = threading.Event()
        bp, bt, sent = h3.burst(run, QS[:8], 300, seq, lambda: mf.log_uniform_size(run.rng, 30, 3000), stop)
        time.sleep(0.3)
        h3.killed(run, b, bp, c)
        stop.set(); bt.join(5)
        run.ev("burst", attempted=len(sent))
    return fr.finish(run, live, broker_config=["tools/" + c for c in cfgs], expired_to_dlq=expired,
                     scenario="32768-byte files, checkpoint/cleanup every 600 ms, indexWriteBatchSize=50; 24 queues "
                              "fx.n3.q00-23 and topic fx.n3.t with durable subs red (color='red'), big (n > 50), all, "
                              "none (color='purple'); run1/run2: 220 sends, partial acks, GC, clean stop; run2 also 12 "
                              "sends to fx.n3.ttl, 9 with expires=now+1.5 s; run3: the TTL queue expires 9 into the "
                              "DLQ, 80 sends, acks, an open tx (4 acks of q05, 6 sends), a burst of up to 300 sends "
                              "without receipt, SIGKILL after 0.3 s. Burst and open-tx sends are not in the live sets.")


def v1():
    """a small store for tests/data: 16 KiB files; a virtual topic whose two consumer queues hold copies of one
    message under one id (Consumer.A acks a third, Consumer.B half) beside a plain queue; a clean stop"""
    run = mf.Run("v1-vtopic-small", 9474)
    cfg = h3.config("v1", fr.kaha(16384))
    live = fr.Live(run)
    VT, Q = "/topic/VirtualTopic.fx.v1", "/queue/fx.v1.q"
    CA, CB = "/queue/Consumer.A.VirtualTopic.fx.v1", "/queue/Consumer.B.VirtualTopic.fx.v1"
    b = run.broker(cfg); b.start()
    for q in (CA, CB):  # consumer queues exist from their first subscription
        c = Stomp(PORT); c.subscribe(q, "s0"); c.disconnect()
    p = Stomp(PORT)
    seq = {}
    for _ in range(40):
        d = run.rng.choice((VT, VT, Q))
        seq[d] = seq.get(d, 0) + 1
        m = run.send(p, d, seq[d], size=mf.log_uniform_size(run.rng, 20, 600))
        for k in ((CA, CB) if d == VT else (Q,)):
            live.add(k, m["fx_id"])
    p.disconnect()
    live.consume(CA, lambda x: x["seq"] % 3 == 0)
    live.consume(CB, lambda x: x["seq"] % 2 == 0)
    live.consume(Q, lambda x: x["seq"] % 2 == 1)
    b.stop(); run.broker_timings.append(b.timings)
    return fr.finish(run, live, broker_config="tools/" + cfg,
                     scenario="16384-byte files; virtual topic VirtualTopic.fx.v1 with consumer queues Consumer.A "
                              "(acks seq % 3 == 0) and Consumer.B (acks even seq), queue fx.v1.q (acks odd seq); "
                              "40 sends, clean stop.")


ALL = {"n1": n1, "n2": n2, "n3": n3, "v1": v1}

if __name__ == "__main__":
    for n in sys.argv[1:] or list(ALL):
        t = time.time()
        ALL[n]()
        print("  %s took %.1fs" % (n, time.time() - t))
