import java.io.*;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.*;
import javax.jms.*;
import org.apache.activemq.ActiveMQConnectionFactory;
import org.apache.activemq.broker.BrokerService;
import org.apache.activemq.command.ActiveMQDestination;
import org.apache.activemq.command.ActiveMQQueue;
import org.apache.activemq.command.ActiveMQTopic;
import org.apache.activemq.command.ActiveMQTextMessage;
import org.apache.activemq.command.MessageId;
import org.apache.activemq.command.SubscriptionInfo;
import org.apache.activemq.store.*;
import org.apache.activemq.store.leveldb.LevelDBPersistenceAdapter;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;

/**
 * Generates real ActiveMQ LevelDB stores.
 *   Gen clean   <storeDir> <manifest.json> [logSize]
 *   Gen kill    <storeDir> <events.jsonl>            (runs until SIGKILLed)
 *   Gen recover <storeDir> <recovered.json> [logSize]
 *   Gen xa      <storeDir> <manifest.json> [logSize]   (XA transactions, some left prepared)
 *   Gen gc      <storeDir> <manifest.json> [logSize]   (logs removed by the store's own GC)
 *   Gen bulk    <storeDir> <manifest.json> [logSize]   (gen.bulk.mib MiB of messages, for benchmarks)
 *   Gen phase   <storeDir> <manifest.json> [logSize]   (one stop/restart phase, gen.phase; replicas)
 */
public class Gen {
    static final ObjectMapper M = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

    static BrokerService startBroker(File dir, long logSize) throws Exception {
        BrokerService b = new BrokerService();
        b.setBrokerName("lvl");
        b.setUseJmx(false);
        b.setPersistent(true);
        b.setSchedulerSupport(false);
        b.setAdvisorySupport(false);
        b.setDataDirectoryFile(new File(dir, "broker-data-unused"));
        LevelDBPersistenceAdapter a = new LevelDBPersistenceAdapter();
        a.setDirectory(dir);
        // pure-java iq80 LevelDB is the only index factory available on Debian
        a.setIndexFactory("org.iq80.leveldb.impl.Iq80DBFactory");
        if (logSize > 0) a.setLogSize(logSize);
        String wbs = System.getProperty("gen.indexWriteBufferSize");
        if (wbs != null) a.setIndexWriteBufferSize(Integer.parseInt(wbs));
        String lc = System.getProperty("gen.logCompression");
        if (lc != null) a.setLogCompression(lc);
        String ic = System.getProperty("gen.indexCompression");
        if (ic != null) a.setIndexCompression(ic);
        b.setPersistenceAdapter(a);
        b.start();
        b.waitUntilStarted();
        return b;
    }

    static Connection connect(String clientId) throws Exception {
        ActiveMQConnectionFactory cf = new ActiveMQConnectionFactory("vm://lvl?create=false");
        cf.setAlwaysSyncSend(true);
        cf.setWatchTopicAdvisories(false);
        Connection c = cf.createConnection();
        if (clientId != null) c.setClientID(clientId);
        c.start();
        return c;
    }

    static String body(String dest, int i, int pad) {
        StringBuilder sb = new StringBuilder(dest + " message #" + i);
        if (pad > 0) { sb.append(' '); for (int k = 0; k < pad; k++) sb.append((char) ('a' + (k + i) % 26)); }
        return sb.toString();
    }

    static Map<String, Object> rec(Message m, String dest, String kind, Object bodyRepr) throws Exception {
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("dest", dest);
        r.put("id", m.getJMSMessageID());
        r.put("type", kind);
        r.put("body", bodyRepr);
        Map<String, Object> props = new TreeMap<>();
        for (Enumeration<?> e = m.getPropertyNames(); e.hasMoreElements();) { String n = (String) e.nextElement(); props.put(n, m.getObjectProperty(n)); }
        r.put("properties", props);
        r.put("persistent", m.getJMSDeliveryMode() == DeliveryMode.PERSISTENT);
        r.put("priority", m.getJMSPriority());
        r.put("correlationId", m.getJMSCorrelationID());
        return r;
    }

    static String hex(byte[] b) { StringBuilder s = new StringBuilder(); for (byte x : b) s.append(String.format("%02x", x)); return s.toString(); }

    // ------------------------------------------------------------------ clean
    static void clean(File dir, File manifest, long logSize) throws Exception {
        BrokerService broker = startBroker(dir, logSize);
        List<Map<String, Object>> sent = new ArrayList<>();
        List<Map<String, Object>> events = new ArrayList<>();
        Connection c = connect("gen-client");
        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        javax.jms.Queue qa = s.createQueue("Q.A"), qb = s.createQueue("Q.B");
        Topic t1 = s.createTopic("T.1");
        // durable subscription (offline afterwards) so topic messages are persisted for it
        TopicSubscriber ds = s.createDurableSubscriber(t1, "sub1");
        ds.close();
        TopicSubscriber ds2 = s.createDurableSubscriber(t1, "sub2-selector", "color = 'red'", false);
        ds2.close();
        events.add(Map.of("event", "durable_subscriptions_created", "clientId", "gen-client", "topic", "T.1", "names", List.of("sub1", "sub2-selector(color = 'red')")));

        MessageProducer p = s.createProducer(null);
        p.setDeliveryMode(DeliveryMode.PERSISTENT);
        // Q.A: 20 text messages, some large (> log buffer chunk), with properties
        for (int i = 0; i < 20; i++) {
            int pad = (i % 5 == 4) ? 20000 : 200;
            TextMessage m = s.createTextMessage(body("Q.A", i, pad));
            m.setIntProperty("seq", i); m.setStringProperty("color", i % 2 == 0 ? "red" : "blue");
            m.setJMSCorrelationID("corr-" + i);
            p.send(qa, m, DeliveryMode.PERSISTENT, i % 10, 0);
            sent.add(rec(m, "queue://Q.A", "text", m.getText()));
        }
        // Q.B: 10 mixed types
        for (int i = 0; i < 10; i++) {
            Message m; Object repr; String kind;
            if (i % 3 == 0) { BytesMessage bm = s.createBytesMessage(); byte[] b = new byte[64 + i]; for (int k = 0; k < b.length; k++) b[k] = (byte) (k * 7 + i); bm.writeBytes(b); m = bm; repr = hex(b); kind = "bytes"; }
            else if (i % 3 == 1) { MapMessage mm = s.createMapMessage(); mm.setInt("n", i); mm.setString("s", "map-" + i); m = mm; repr = Map.of("n", i, "s", "map-" + i); kind = "map"; }
            else { TextMessage tm = s.createTextMessage(body("Q.B", i, 50)); m = tm; repr = tm.getText(); kind = "text"; }
            m.setIntProperty("seq", i);
            p.send(qb, m);
            sent.add(rec(m, "queue://Q.B", kind, repr));
        }
        // T.1: 8 messages, alternating color (sub2-selector only matches red)
        for (int i = 0; i < 8; i++) {
            TextMessage m = s.createTextMessage(body("T.1", i, 100));
            m.setIntProperty("seq", i); m.setStringProperty("color", i % 2 == 0 ? "red" : "blue");
            p.send(t1, m);
            sent.add(rec(m, "topic://T.1", "text", m.getText()));
        }
        // consume first 5 from Q.A (auto ack)
        List<String> consumedQA = new ArrayList<>();
        MessageConsumer ca = s.createConsumer(qa);
        for (int i = 0; i < 5; i++) { Message m = ca.receive(5000); consumedQA.add(m.getJMSMessageID()); }
        ca.close();
        events.add(Map.of("event", "consumed_auto_ack", "dest", "queue://Q.A", "ids", consumedQA));
        // durable sub1 consumes 3 of T.1
        List<String> consumedSub1 = new ArrayList<>();
        ds = s.createDurableSubscriber(t1, "sub1");
        for (int i = 0; i < 3; i++) { Message m = ds.receive(5000); consumedSub1.add(m.getJMSMessageID()); }
        ds.close();
        events.add(Map.of("event", "consumed_durable", "clientId", "gen-client", "sub", "sub1", "ids", consumedSub1));

        // transactions
        Session ts = c.createSession(true, Session.SESSION_TRANSACTED);
        MessageProducer tp = ts.createProducer(qb);
        List<String> committed = new ArrayList<>(), rolledBack = new ArrayList<>();
        for (int i = 0; i < 3; i++) { TextMessage m = ts.createTextMessage("Q.B tx-committed #" + i); m.setStringProperty("tx", "commit"); tp.send(m); committed.add(m.getJMSMessageID()); sent.add(rec(m, "queue://Q.B", "text", m.getText())); }
        ts.commit();
        for (int i = 0; i < 2; i++) { TextMessage m = ts.createTextMessage("Q.B tx-rolledback #" + i); m.setStringProperty("tx", "rollback"); tp.send(m); rolledBack.add(m.getJMSMessageID()); sent.add(rec(m, "queue://Q.B", "text", m.getText())); }
        ts.rollback();
        events.add(Map.of("event", "tx_send_commit", "dest", "queue://Q.B", "ids", committed));
        events.add(Map.of("event", "tx_send_rollback", "dest", "queue://Q.B", "ids", rolledBack));
        // transacted consume: take 2 from Q.B and roll back (stay), then take 2 and commit (removed)
        MessageConsumer tc = ts.createConsumer(qb);
        List<String> rbRecv = new ArrayList<>(), cmRecv = new ArrayList<>();
        for (int i = 0; i < 2; i++) rbRecv.add(tc.receive(5000).getJMSMessageID());
        ts.rollback();
        for (int i = 0; i < 2; i++) cmRecv.add(tc.receive(5000).getJMSMessageID());
        ts.commit();
        tc.close();
        events.add(Map.of("event", "tx_consume_rollback", "dest", "queue://Q.B", "ids", rbRecv));
        events.add(Map.of("event", "tx_consume_commit", "dest", "queue://Q.B", "ids", cmRecv));
        ts.close(); s.close(); c.close();
        broker.stop();
        broker.waitUntilStopped();

        Map<String, Object> man = new LinkedHashMap<>();
        man.put("store", dir.getAbsolutePath());
        man.put("generator", "Gen clean (ActiveMQ 5.17.2 broker + activemq-leveldb-store 5.16.7 sources, iq80 leveldb 0.7)");
        man.put("logSize", logSize);
        man.put("indexWriteBufferSize", System.getProperty("gen.indexWriteBufferSize"));
        man.put("logCompression", System.getProperty("gen.logCompression", "none"));     // LevelDBStore defaults
        man.put("indexCompression", System.getProperty("gen.indexCompression", "snappy"));
        man.put("shutdown", "clean");
        man.put("sent", sent);
        man.put("events", events);
        M.writeValue(manifest, man);
        System.out.println("clean run done: " + sent.size() + " sent");
    }

    // ------------------------------------------------------------------ kill
    static void kill(File dir, File eventsFile, long logSize) throws Exception {
        BrokerService broker = startBroker(dir, logSize);
        PrintStream ev = new PrintStream(new FileOutputStream(eventsFile, true), true, "UTF-8");
        ObjectMapper m1 = new ObjectMapper();
        Connection c = connect("kill-client");
        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Topic t = s.createTopic("T.K");
        s.createDurableSubscriber(t, "subK").close();
        ev.println(m1.writeValueAsString(Map.of("event", "durable_subscription_created", "clientId", "kill-client", "sub", "subK", "topic", "topic://T.K")));
        // background consumer on Q.K2 (client ack, acks each message, logs after ack returns)
        Connection c2 = connect(null);
        Session s2 = c2.createSession(false, Session.CLIENT_ACKNOWLEDGE);
        MessageConsumer cons = s2.createConsumer(s2.createQueue("Q.K2"));
        Thread th = new Thread(() -> {
            try {
                while (true) {
                    Message m = cons.receive(1000);
                    if (m == null) continue;
                    m.acknowledge();
                    synchronized (ev) { ev.println(m1.writeValueAsString(Map.of("event", "acked", "dest", "queue://Q.K2", "id", m.getJMSMessageID()))); }
                }
            } catch (Exception e) { }
        });
        th.setDaemon(true); th.start();
        MessageProducer p = s.createProducer(null);
        p.setDeliveryMode(DeliveryMode.PERSISTENT);
        String[] dests = {"queue://Q.K1", "queue://Q.K2", "topic://T.K"};
        for (int i = 0; ; i++) {
            String dn = dests[i % 3];
            Destination d = dn.startsWith("queue") ? s.createQueue(dn.substring(8)) : s.createTopic(dn.substring(8));
            TextMessage m = s.createTextMessage(body(dn, i, 300 + (i % 7) * 100));
            m.setIntProperty("seq", i);
            synchronized (ev) { ev.println(m1.writeValueAsString(Map.of("event", "send_begin", "dest", dn, "seq", i))); }
            p.send(d, m);
            synchronized (ev) { ev.println(m1.writeValueAsString(Map.of("event", "send_ok", "dest", dn, "seq", i, "id", m.getJMSMessageID(), "body", m.getText(), "record", rec(m, dn, "text", m.getText())))); }
            if (i == 0) System.out.println("READY");
            if (i == 0) startTxProducers(ev, m1);
        }
    }

    /**
     * gen.txProducers (default 0) extra threads, each a transacted session committing gen.txSize (default 40)
     * messages of about gen.txPad (default 16000) chars to queue://Q.KT: a commit is one broker unit of work,
     * several of them are batched into one log unit of work, and one larger than the 512 KiB append buffer is
     * written in several write() calls, so a SIGKILL can leave it cut on disk.
     */
    static void startTxProducers(PrintStream ev, ObjectMapper m1) throws Exception {
        int n = Integer.getInteger("gen.txProducers", 0), size = Integer.getInteger("gen.txSize", 40), pad = Integer.getInteger("gen.txPad", 16000);
        for (int t = 0; t < n; t++) {
            final int th = t;
            Connection c = connect(null);
            Thread x = new Thread(() -> {
                try {
                    Session ts = c.createSession(true, Session.SESSION_TRANSACTED);
                    MessageProducer tp = ts.createProducer(ts.createQueue("Q.KT"));
                    tp.setDeliveryMode(DeliveryMode.PERSISTENT);
                    for (int b = 0; ; b++) {
                        List<String> ids = new ArrayList<>();
                        List<Map<String, Object>> recs = new ArrayList<>();
                        for (int k = 0; k < size; k++) {
                            int seq = b * size + k;
                            TextMessage m = ts.createTextMessage(body("queue://Q.KT t" + th, seq, pad + k));
                            m.setIntProperty("seq", seq); m.setIntProperty("producer", th); m.setIntProperty("batch", b);
                            tp.send(m);
                            ids.add(m.getJMSMessageID());
                            recs.add(rec(m, "queue://Q.KT", "text", m.getText()));
                        }
                        synchronized (ev) { ev.println(m1.writeValueAsString(Map.of("event", "commit_begin", "dest", "queue://Q.KT", "producer", th, "batch", b, "ids", ids))); }
                        ts.commit();
                        synchronized (ev) { ev.println(m1.writeValueAsString(Map.of("event", "commit_ok", "dest", "queue://Q.KT", "producer", th, "batch", b, "ids", ids, "records", recs))); }
                    }
                } catch (Exception e) { }
            });
            x.setDaemon(true); x.start();
        }
    }


    // ------------------------------------------------------------------ xa
    /** An XA branch id: javax.transaction.xa.Xid with a fixed formatId and readable gtrid/bqual bytes. */
    static final class GenXid implements javax.transaction.xa.Xid {
        final byte[] g, q;
        GenXid(String g, String q) { this.g = g.getBytes(StandardCharsets.US_ASCII); this.q = q.getBytes(StandardCharsets.US_ASCII); }
        public int getFormatId() { return 0x4C564C; }   // "LVL"
        public byte[] getGlobalTransactionId() { return g; }
        public byte[] getBranchQualifier() { return q; }
    }

    static Map<String, Object> xidRec(GenXid x, String outcome, List<String> sentIds, List<String> ackedIds) {
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("formatId", x.getFormatId());
        r.put("globalTransactionId", new String(x.g, StandardCharsets.US_ASCII));
        r.put("globalTransactionIdHex", hex(x.g));
        r.put("branchQualifier", new String(x.q, StandardCharsets.US_ASCII));
        r.put("branchQualifierHex", hex(x.q));
        r.put("outcome", outcome);
        r.put("sent", sentIds);
        r.put("acked", ackedIds);
        return r;
    }

    /**
     * XA transactions through the broker's XA session: some left prepared when the broker stops (sends to a
     * queue, sends to a topic with a durable subscription, acks of queue messages), one committed after prepare,
     * one rolled back after prepare, one committed in one phase.
     */
    static void xa(File dir, File manifest, long logSize) throws Exception {
        BrokerService broker = startBroker(dir, logSize);
        List<Map<String, Object>> sent = new ArrayList<>(), events = new ArrayList<>(), xids = new ArrayList<>();
        Connection c = connect("xa-client");
        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        javax.jms.Queue qx = s.createQueue("Q.X"), qy = s.createQueue("Q.Y");
        Topic tx = s.createTopic("T.X");
        s.createDurableSubscriber(tx, "subX").close();
        events.add(Map.of("event", "durable_subscription_created", "clientId", "xa-client", "topic", "topic://T.X", "names", List.of("subX")));
        MessageProducer p = s.createProducer(null);
        // plain (non-XA) messages on Q.Y, some of which XA consumers ack
        for (int i = 0; i < 6; i++) {
            TextMessage m = s.createTextMessage(body("Q.Y", i, 100)); m.setIntProperty("seq", i);
            p.send(qy, m, DeliveryMode.PERSISTENT, 4, 0); sent.add(rec(m, "queue://Q.Y", "text", m.getText()));
        }
        org.apache.activemq.ActiveMQXAConnectionFactory xcf = new org.apache.activemq.ActiveMQXAConnectionFactory("vm://lvl?create=false");
        xcf.setAlwaysSyncSend(true); xcf.setWatchTopicAdvisories(false);
        xcf.getPrefetchPolicy().setAll(0);   // pull: a consumer closed inside an open (prepared) branch must not keep other messages dispatched to it
        String[][] plan = {
            // name, destination, sends, acks of Q.Y, outcome
            {"xa-prepared-1", "queue://Q.X", "3", "0", "prepared"},
            {"xa-prepared-2", "topic://T.X", "2", "0", "prepared"},
            {"xa-prepared-ack", "queue://Q.Y", "0", "2", "prepared"},
            {"xa-committed-2pc", "queue://Q.X", "2", "1", "committed"},
            {"xa-rolledback", "queue://Q.X", "2", "1", "rolledback"},
            {"xa-committed-1pc", "queue://Q.X", "1", "0", "committed-one-phase"},
            {"xa-prepared-3", "queue://Q.X", "1", "0", "prepared"},
        };
        int seq = 100;
        for (String[] st : plan) {
            javax.jms.XAConnection xc = xcf.createXAConnection();
            xc.start();
            javax.jms.XASession xs = xc.createXASession();
            javax.transaction.xa.XAResource xr = xs.getXAResource();
            Session ss = xs.getSession();
            GenXid xid = new GenXid("gtrid-" + st[0], "bqual-1");
            xr.start(xid, javax.transaction.xa.XAResource.TMNOFLAGS);
            List<String> ids = new ArrayList<>(), acked = new ArrayList<>();
            String dn = st[1];
            Destination d = dn.startsWith("queue") ? ss.createQueue(dn.substring(8)) : ss.createTopic(dn.substring(8));
            MessageProducer xp = ss.createProducer(d);
            xp.setDeliveryMode(DeliveryMode.PERSISTENT);
            for (int i = 0; i < Integer.parseInt(st[2]); i++) {
                TextMessage m = ss.createTextMessage(body(dn + " " + st[0], seq, 80)); m.setIntProperty("seq", seq++); m.setStringProperty("xa", st[0]);
                xp.send(m); ids.add(m.getJMSMessageID()); sent.add(rec(m, dn, "text", m.getText()));
            }
            int nack = Integer.parseInt(st[3]);
            if (nack > 0) {
                MessageConsumer xcons = ss.createConsumer(qy);
                for (int i = 0; i < nack; i++) { Message m = xcons.receive(5000); acked.add(m.getJMSMessageID()); }
                xcons.close();
            }
            xr.end(xid, javax.transaction.xa.XAResource.TMSUCCESS);
            switch (st[4]) {
                case "prepared": xr.prepare(xid); break;
                case "committed": xr.prepare(xid); xr.commit(xid, false); break;
                case "rolledback": xr.prepare(xid); xr.rollback(xid); break;
                case "committed-one-phase": xr.commit(xid, true); break;
            }
            xids.add(xidRec(xid, st[4], ids, acked));
            if (!st[4].equals("prepared")) xc.close();
            // prepared: leave the connection open until the broker stops, as an in-doubt transaction manager would
        }
        s.close(); c.close();
        broker.stop();
        broker.waitUntilStopped();
        Map<String, Object> man = new LinkedHashMap<>();
        man.put("store", dir.getAbsolutePath());
        man.put("generator", "Gen xa (ActiveMQ 5.17.2 broker + activemq-leveldb-store 5.16.7 sources, iq80 leveldb 0.7)");
        man.put("logSize", logSize);
        man.put("indexWriteBufferSize", System.getProperty("gen.indexWriteBufferSize"));
        man.put("logCompression", System.getProperty("gen.logCompression", "none"));     // LevelDBStore defaults
        man.put("indexCompression", System.getProperty("gen.indexCompression", "snappy"));
        man.put("shutdown", "clean");
        man.put("sent", sent);
        man.put("events", events);
        man.put("xaTransactions", xids);
        M.writeValue(manifest, man);
        System.out.println("xa run done: " + sent.size() + " sent");
    }

    // ------------------------------------------------------------------ gc
    static Set<String> logNames(File dir) {
        Set<String> r = new TreeSet<>();
        String[] l = dir.list();
        if (l != null) for (String n : l) if (n.endsWith(".log")) r.add(n);
        return r;
    }

    /**
     * Log files removed by the store's own GC: small logs, most messages consumed, then the broker kept
     * running until its periodic GC (every 10 s, LevelDBStore DBManager.pollGc) deleted the unreferenced logs
     * older than the last index snapshot.
     */
    static void gc(File dir, File manifest, long logSize) throws Exception {
        int n = Integer.getInteger("gen.gc.messages", 1500), keep = Integer.getInteger("gen.gc.keep", 40);
        BrokerService broker = startBroker(dir, logSize);
        Set<String> seen = Collections.synchronizedSet(new TreeSet<>());
        Thread watcher = new Thread(() -> { while (true) { seen.addAll(logNames(dir)); try { Thread.sleep(20); } catch (InterruptedException e) { return; } } });
        watcher.setDaemon(true); watcher.start();
        List<Map<String, Object>> sent = new ArrayList<>(), events = new ArrayList<>();
        Connection c = connect("gc-client");
        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        javax.jms.Queue qg = s.createQueue("Q.G");
        Topic tg = s.createTopic("T.G");
        s.createDurableSubscriber(tg, "subG").close();
        events.add(Map.of("event", "durable_subscription_created", "clientId", "gc-client", "topic", "topic://T.G", "names", List.of("subG")));
        MessageProducer p = s.createProducer(null);
        for (int i = 0; i < n; i++) {
            TextMessage m = s.createTextMessage(body("Q.G", i, 900)); m.setIntProperty("seq", i);
            p.send(qg, m, DeliveryMode.PERSISTENT, 4, 0); sent.add(rec(m, "queue://Q.G", "text", m.getText()));
            if (i % 5 == 0) {
                TextMessage t = s.createTextMessage(body("T.G", i / 5, 600)); t.setIntProperty("seq", i / 5);
                p.send(tg, t, DeliveryMode.PERSISTENT, 4, 0); sent.add(rec(t, "topic://T.G", "text", t.getText()));
            }
        }
        List<String> consumed = new ArrayList<>(), consumedSub = new ArrayList<>();
        MessageConsumer cg = s.createConsumer(qg);
        for (int i = 0; i < n - keep; i++) consumed.add(cg.receive(5000).getJMSMessageID());
        cg.close();
        events.add(Map.of("event", "consumed_auto_ack", "dest", "queue://Q.G", "ids", consumed));
        TopicSubscriber ds = s.createDurableSubscriber(tg, "subG");
        for (int i = 0; i < n / 5 - keep / 5; i++) consumedSub.add(ds.receive(5000).getJMSMessageID());
        ds.close();
        events.add(Map.of("event", "consumed_durable", "clientId", "gc-client", "sub", "subG", "ids", consumedSub));
        // a few more sends so the logs rotate (each rotation snapshots the index) past the consumed region
        for (int i = n; i < n + 3 * keep; i++) {
            TextMessage m = s.createTextMessage(body("Q.G", i, 900)); m.setIntProperty("seq", i);
            p.send(qg, m, DeliveryMode.PERSISTENT, 4, 0); sent.add(rec(m, "queue://Q.G", "text", m.getText()));
        }
        long until = System.currentTimeMillis() + 60_000;
        Set<String> before = new TreeSet<>(seen);
        while (System.currentTimeMillis() < until) {
            Thread.sleep(1000);
            Set<String> now = logNames(dir);
            if (!now.containsAll(before) && System.currentTimeMillis() > until - 35_000) break;
        }
        events.add(Map.of("event", "waited_for_gc", "logsSeen", new ArrayList<>(seen), "logsPresent", new ArrayList<>(logNames(dir))));
        s.close(); c.close();
        broker.stop();
        broker.waitUntilStopped();
        watcher.interrupt();
        Set<String> removed = new TreeSet<>(seen); removed.removeAll(logNames(dir));
        Map<String, Object> man = new LinkedHashMap<>();
        man.put("store", dir.getAbsolutePath());
        man.put("generator", "Gen gc (ActiveMQ 5.17.2 broker + activemq-leveldb-store 5.16.7 sources, iq80 leveldb 0.7)");
        man.put("logSize", logSize);
        man.put("indexWriteBufferSize", System.getProperty("gen.indexWriteBufferSize"));
        man.put("logCompression", System.getProperty("gen.logCompression", "none"));     // LevelDBStore defaults
        man.put("indexCompression", System.getProperty("gen.indexCompression", "snappy"));
        man.put("shutdown", "clean");
        man.put("sent", sent);
        man.put("events", events);
        man.put("logsSeen", new ArrayList<>(seen));
        man.put("logsRemovedByGc", new ArrayList<>(removed));
        M.writeValue(manifest, man);
        System.out.println("gc run done: " + sent.size() + " sent, removed logs " + removed);
    }

    // ------------------------------------------------------------------ bulk
    /**
     * A large store for benchmarks: gen.bulk.mib (default 288) MiB of message bodies, text and bytes, 1 to 60 KB,
     * over four queues and a topic with two durable subscriptions, sent in transactions of 100; a tenth of
     * Q.BULK.1 consumed. The manifest gives counts, not every message (recovered.json has every id).
     */
    static void bulk(File dir, File manifest, long logSize) throws Exception {
        long target = Long.getLong("gen.bulk.mib", 288L) << 20;
        BrokerService broker = startBroker(dir, logSize);
        Connection c = connect("bulk-client");
        Session s = c.createSession(true, Session.SESSION_TRANSACTED);
        Topic t = s.createTopic("T.BULK");
        s.createDurableSubscriber(t, "subAll").close();
        s.createDurableSubscriber(t, "subEven", "parity = 0", false).close();
        s.commit();
        MessageProducer p = s.createProducer(null);
        p.setDeliveryMode(DeliveryMode.PERSISTENT);
        Random rnd = new Random(20261125L);
        Map<String, Integer> counts = new TreeMap<>();
        long bytes = 0; int i = 0;
        String[] dests = {"queue://Q.BULK.1", "queue://Q.BULK.2", "queue://Q.BULK.3", "queue://Q.BULK.4", "topic://T.BULK"};
        while (bytes < target) {
            String dn = dests[i % dests.length];
            Destination d = dn.startsWith("queue") ? s.createQueue(dn.substring(8)) : s.createTopic(dn.substring(8));
            int size = 1000 + rnd.nextInt(i % 50 == 0 ? 60000 : 12000);
            Message m;
            if (i % 2 == 0) { m = s.createTextMessage(body(dn, i, size)); }
            else { BytesMessage bm = s.createBytesMessage(); byte[] b = new byte[size]; rnd.nextBytes(b); bm.writeBytes(b); m = bm; }
            m.setIntProperty("seq", i); m.setIntProperty("parity", i % 2);
            p.send(d, m);
            counts.merge(dn, 1, Integer::sum);
            bytes += size; i++;
            if (i % 100 == 0) s.commit();
        }
        s.commit();
        MessageConsumer cons = s.createConsumer(s.createQueue("Q.BULK.1"));
        int consumed = counts.get("queue://Q.BULK.1") / 10;
        for (int k = 0; k < consumed; k++) { cons.receive(10000); if (k % 100 == 99) s.commit(); }
        s.commit(); cons.close();
        s.close(); c.close();
        broker.stop();
        broker.waitUntilStopped();
        Map<String, Object> man = new LinkedHashMap<>();
        man.put("store", dir.getAbsolutePath());
        man.put("generator", "Gen bulk (ActiveMQ 5.17.2 broker + activemq-leveldb-store 5.16.7 sources, iq80 leveldb 0.7)");
        man.put("logSize", logSize);
        man.put("indexWriteBufferSize", System.getProperty("gen.indexWriteBufferSize"));
        man.put("logCompression", System.getProperty("gen.logCompression", "none"));     // LevelDBStore defaults
        man.put("indexCompression", System.getProperty("gen.indexCompression", "snappy"));
        man.put("shutdown", "clean");
        man.put("sent", List.of());
        man.put("sentCounts", counts);
        man.put("sentBodyBytes", bytes);
        man.put("events", List.of(Map.of("event", "consumed_tx", "dest", "queue://Q.BULK.1", "count", consumed),
                                  Map.of("event", "durable_subscriptions_created", "clientId", "bulk-client", "topic", "topic://T.BULK", "names", List.of("subAll", "subEven(parity = 0)"))));
        M.writeValue(manifest, man);
        System.out.println("bulk run done: " + i + " sent, " + bytes + " body bytes");
    }

    // ------------------------------------------------------------------ phase
    /**
     * One phase of a run that is stopped and restarted on the same store (gen.phase = 0, 1, 2 ...): sends 30
     * messages to Q.R and 10 to T.R (durable subR), consumes 10 of Q.R and 4 of subR, stops cleanly. Copies of
     * the store taken between phases are what lagging replicas hold: each one's log is a prefix of the next.
     */
    static void phase(File dir, File manifest, long logSize) throws Exception {
        int ph = Integer.getInteger("gen.phase", 0);
        BrokerService broker = startBroker(dir, logSize);
        List<Map<String, Object>> sent = new ArrayList<>(), events = new ArrayList<>();
        Connection c = connect("replica-client");
        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        javax.jms.Queue q = s.createQueue("Q.R");
        Topic t = s.createTopic("T.R");
        s.createDurableSubscriber(t, "subR").close();
        MessageProducer p = s.createProducer(null);
        for (int i = 0; i < 30; i++) {
            int seq = ph * 100 + i;
            TextMessage m = s.createTextMessage(body("Q.R phase " + ph, seq, 300)); m.setIntProperty("seq", seq); m.setIntProperty("phase", ph);
            p.send(q, m, DeliveryMode.PERSISTENT, 4, 0); sent.add(rec(m, "queue://Q.R", "text", m.getText()));
            if (i % 3 == 0) {
                TextMessage tm = s.createTextMessage(body("T.R phase " + ph, seq, 200)); tm.setIntProperty("seq", seq); tm.setIntProperty("phase", ph);
                p.send(t, tm, DeliveryMode.PERSISTENT, 4, 0); sent.add(rec(tm, "topic://T.R", "text", tm.getText()));
            }
        }
        List<String> cq = new ArrayList<>(), cs = new ArrayList<>();
        MessageConsumer mc = s.createConsumer(q);
        for (int i = 0; i < 10; i++) cq.add(mc.receive(5000).getJMSMessageID());
        mc.close();
        TopicSubscriber ds = s.createDurableSubscriber(t, "subR");
        for (int i = 0; i < 4; i++) cs.add(ds.receive(5000).getJMSMessageID());
        ds.close();
        events.add(Map.of("event", "consumed_auto_ack", "dest", "queue://Q.R", "phase", ph, "ids", cq));
        events.add(Map.of("event", "consumed_durable", "clientId", "replica-client", "sub", "subR", "phase", ph, "ids", cs));
        s.close(); c.close();
        broker.stop();
        broker.waitUntilStopped();
        Map<String, Object> man = new LinkedHashMap<>();
        man.put("store", dir.getAbsolutePath());
        man.put("generator", "Gen phase " + ph + " (ActiveMQ 5.17.2 broker + activemq-leveldb-store 5.16.7 sources, iq80 leveldb 0.7)");
        man.put("logSize", logSize);
        man.put("indexWriteBufferSize", System.getProperty("gen.indexWriteBufferSize"));
        man.put("logCompression", System.getProperty("gen.logCompression", "none"));     // LevelDBStore defaults
        man.put("indexCompression", System.getProperty("gen.indexCompression", "snappy"));
        man.put("shutdown", "clean");
        man.put("sent", sent);
        man.put("events", events);
        M.writeValue(manifest, man);
        System.out.println("phase " + ph + " done");
    }

    // ------------------------------------------------------------------ recover
    static void recover(File dir, File out, long logSize) throws Exception {
        BrokerService broker = startBroker(dir, logSize);
        PersistenceAdapter a = broker.getPersistenceAdapter();
        Map<String, Object> res = new LinkedHashMap<>();
        res.put("store", dir.getAbsolutePath());
        List<Map<String, Object>> dests = new ArrayList<>();
        List<ActiveMQDestination> ds = new ArrayList<>(a.getDestinations());
        ds.sort(Comparator.comparing(ActiveMQDestination::getQualifiedName));
        for (ActiveMQDestination d : ds) {
            Map<String, Object> dr = new LinkedHashMap<>();
            dr.put("dest", d.getQualifiedName());
            if (d.isQueue()) {
                MessageStore ms = a.createQueueMessageStore((ActiveMQQueue) d);
                dr.put("messageCount", ms.getMessageCount());
                dr.put("messages", collect(l -> ms.recover(l)));
            } else {
                TopicMessageStore ts = a.createTopicMessageStore((ActiveMQTopic) d);
                dr.put("messageCount", ts.getMessageCount());
                dr.put("messages", collect(l -> ts.recover(l)));
                List<Map<String, Object>> subs = new ArrayList<>();
                for (SubscriptionInfo si : ts.getAllSubscriptions()) {
                    Map<String, Object> sr = new LinkedHashMap<>();
                    sr.put("clientId", si.getClientId());
                    sr.put("subscriptionName", si.getSubscriptionName());
                    sr.put("selector", si.getSelector());
                    sr.put("pendingCount", ts.getMessageCount(si.getClientId(), si.getSubscriptionName()));
                    sr.put("pending", collect(l -> ts.recoverSubscription(si.getClientId(), si.getSubscriptionName(), l)));
                    subs.add(sr);
                }
                dr.put("durableSubscriptions", subs);
            }
            dests.add(dr);
        }
        res.put("destinations", dests);
        TransactionStore txs = a.createTransactionStore();
        List<String> prepared = new ArrayList<>();
        List<Map<String, Object>> preparedDetails = new ArrayList<>();
        txs.recover((xid, adds, acks) -> {
            prepared.add(String.valueOf(xid));
            Map<String, Object> d = new LinkedHashMap<>();
            d.put("xid", String.valueOf(xid));
            d.put("formatId", xid.getFormatId());
            d.put("globalTransactionIdHex", hex(xid.getGlobalTransactionId()));
            d.put("branchQualifierHex", hex(xid.getBranchQualifier()));
            List<Map<String, Object>> al = new ArrayList<>();
            for (org.apache.activemq.command.Message m : adds) al.add(Map.of("dest", m.getDestination().getQualifiedName(), "id", m.getMessageId().toString()));
            List<Map<String, Object>> kl = new ArrayList<>();
            for (org.apache.activemq.command.MessageAck ak : acks) kl.add(Map.of("dest", ak.getDestination().getQualifiedName(), "lastMessageId", String.valueOf(ak.getLastMessageId())));
            d.put("adds", al);
            d.put("acks", kl);
            preparedDetails.add(d);
        });
        res.put("preparedTransactions", prepared);
        res.put("preparedTransactionDetails", preparedDetails);
        broker.stop();
        broker.waitUntilStopped();
        M.writeValue(out, res);
        System.out.println("recover done: " + out);
    }

    interface Rec { void run(MessageRecoveryListener l) throws Exception; }

    static List<Map<String, Object>> collect(Rec r) throws Exception {
        List<Map<String, Object>> list = new ArrayList<>();
        r.run(new MessageRecoveryListener() {
            public boolean recoverMessage(org.apache.activemq.command.Message m) throws Exception {
                Map<String, Object> x = new LinkedHashMap<>();
                x.put("id", m.getMessageId().toString());
                x.put("brokerSequenceId", m.getMessageId().getBrokerSequenceId());
                x.put("class", m.getClass().getSimpleName());
                if (m instanceof ActiveMQTextMessage) {
                    String text = ((ActiveMQTextMessage) m).getText();
                    if (Boolean.parseBoolean(System.getProperty("gen.recover.bodies", "true"))) x.put("text", text);
                    else x.put("textSha256", hex(MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.UTF_8))));
                }
                Object seq = m.getProperty("seq");
                if (seq != null) x.put("seq", seq);
                org.apache.activemq.util.ByteSequence bs = m.getContent(); byte[] content = bs == null ? new byte[0] : Arrays.copyOfRange(bs.getData(), bs.getOffset(), bs.getOffset() + bs.getLength());
                x.put("contentSha256", hex(MessageDigest.getInstance("SHA-256").digest(content)));
                list.add(x);
                return true;
            }
            public boolean recoverMessageReference(MessageId id) { Map<String, Object> x = new LinkedHashMap<>(); x.put("ref", id.toString()); list.add(x); return true; }
            public boolean hasSpace() { return true; }
            public boolean isDuplicate(MessageId id) { return false; }
        });
        return list;
    }

    // durable subscribers with selectors, acked in rounds while more is sent (acks across many small log files),
    // a late subscriber, a queue half consumed; then waits for the store's GC, which deletes the log files
    // nothing pins any more (files in the middle, while the oldest unconsumed messages pin older ones)
    static void subs(File dir, File manifest, long logSize) throws Exception {
        int rounds = Integer.getInteger("gen.subs.rounds", 12), per = Integer.getInteger("gen.subs.per", 40);
        BrokerService broker = startBroker(dir, logSize);
        Set<String> seen = Collections.synchronizedSet(new TreeSet<>());
        Thread watcher = new Thread(() -> { while (true) { seen.addAll(logNames(dir)); try { Thread.sleep(20); } catch (InterruptedException e) { return; } } });
        watcher.setDaemon(true); watcher.start();
        String evPath = System.getProperty("gen.subs.events");
        PrintStream evOut = evPath == null ? null : new PrintStream(new FileOutputStream(evPath, true), true, "UTF-8");
        List<Map<String, Object>> sent = new ArrayList<>() {
            @Override public boolean add(Map<String, Object> r) { Gen.stream(evOut, "sent", r); return super.add(r); } };
        List<Map<String, Object>> events = new ArrayList<>() {
            @Override public boolean add(Map<String, Object> r) { Gen.stream(evOut, "event", r); return super.add(r); } };
        Connection c = connect("subs-client");
        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Topic ts = s.createTopic("T.S");
        javax.jms.Queue qs = s.createQueue("Q.S");
        String[][] subs = {{"subAll", null}, {"subRed", "color = 'red'"}, {"subOdd", "parity = 1"},
                           {"subNone", "color = 'black'"}};
        for (String[] d : subs) {
            s.createDurableSubscriber(ts, d[0], d[1], false).close();
            events.add(new LinkedHashMap<>(Map.of("event", "durable_subscription_created", "clientId", "subs-client",
                    "topic", "topic://T.S", "sub", d[0], "selector", String.valueOf(d[1]))));
        }
        MessageProducer p = s.createProducer(null);
        String[] colors = {"red", "green", "blue"};
        int seq = 0;
        for (int r = 0; r < rounds; r++) {
            if (r == rounds / 2) {
                s.createDurableSubscriber(ts, "subLate", "color = 'green'", false).close();
                events.add(new LinkedHashMap<>(Map.of("event", "durable_subscription_created", "clientId", "subs-client",
                        "topic", "topic://T.S", "sub", "subLate", "selector", "color = 'green'")));
            }
            for (int i = 0; i < per; i++, seq++) {
                TextMessage m = s.createTextMessage(body("T.S", seq, 300 + (seq % 5) * 150));
                m.setIntProperty("seq", seq); m.setStringProperty("color", colors[seq % 3]); m.setIntProperty("parity", seq % 2);
                p.send(ts, m, DeliveryMode.PERSISTENT, 4, 0); sent.add(rec(m, "topic://T.S", "text", m.getText()));
                if (i % 4 == 0) {
                    TextMessage q = s.createTextMessage(body("Q.S", seq, 500));
                    q.setIntProperty("seq", seq);
                    p.send(qs, q, DeliveryMode.PERSISTENT, 4, 0); sent.add(rec(q, "queue://Q.S", "text", q.getText()));
                }
            }
            // each round acks some of what each subscription has (not the last rounds' for subAll), across files
            for (String[] d : subs) {
                int take = d[0].equals("subAll") ? (r < rounds - 2 ? per - 5 : 0) : d[0].equals("subRed") ? per / 6 : per / 2;
                if (take == 0) continue;
                TopicSubscriber ds = s.createDurableSubscriber(ts, d[0], d[1], false);
                List<String> ids = new ArrayList<>();
                for (int k = 0; k < take; k++) { Message m = ds.receive(300); if (m == null) break; ids.add(m.getJMSMessageID()); }
                ds.close();
                events.add(new LinkedHashMap<>(Map.of("event", "consumed_durable", "clientId", "subs-client", "sub", d[0], "round", r, "ids", ids)));
            }
            if (r % 3 == 1) {
                MessageConsumer cq = s.createConsumer(qs);
                List<String> ids = new ArrayList<>();
                for (int k = 0; k < per / 6; k++) { Message m = cq.receive(300); if (m == null) break; ids.add(m.getJMSMessageID()); }
                cq.close();
                events.add(new LinkedHashMap<>(Map.of("event", "consumed_auto_ack", "dest", "queue://Q.S", "round", r, "ids", ids)));
            }
        }
        long until = System.currentTimeMillis() + Integer.getInteger("gen.subs.waitMs", 25_000);
        while (System.currentTimeMillis() < until) Thread.sleep(500);
        events.add(Map.of("event", "waited_for_gc", "logsSeen", new ArrayList<>(seen), "logsPresent", new ArrayList<>(logNames(dir))));
        s.close(); c.close();
        broker.stop();
        broker.waitUntilStopped();
        watcher.interrupt();
        Set<String> removed = new TreeSet<>(seen); removed.removeAll(logNames(dir));
        Map<String, Object> man = new LinkedHashMap<>();
        man.put("store", dir.getAbsolutePath());
        man.put("generator", "Gen subs (ActiveMQ 5.17.2 broker + activemq-leveldb-store 5.16.7 sources, iq80 leveldb 0.7)");
        man.put("logSize", logSize);
        man.put("indexWriteBufferSize", System.getProperty("gen.indexWriteBufferSize"));
        man.put("logCompression", System.getProperty("gen.logCompression", "none"));     // LevelDBStore defaults
        man.put("indexCompression", System.getProperty("gen.indexCompression", "snappy"));
        man.put("shutdown", "clean");
        man.put("sent", sent);
        man.put("events", events);
        man.put("logsSeen", new ArrayList<>(seen));
        man.put("logsRemovedByGc", new ArrayList<>(removed));
        M.writeValue(manifest, man);
        System.out.println("subs run done: " + sent.size() + " sent, removed logs " + removed);
    }

    static final ObjectMapper LINES = new ObjectMapper();  // one JSON object a line (M indents)

    static void stream(PrintStream out, String what, Map<String, Object> r) {
        if (out == null) return;
        try { synchronized (out) { out.println(LINES.writeValueAsString(Map.of(what, r))); } } catch (Exception e) { throw new RuntimeException(e); }
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        File dir = new File(args[1]);
        File out = new File(args[2]);
        long logSize = args.length > 3 ? Long.parseLong(args[3]) : 0;
        switch (mode) {
            case "clean": clean(dir, out, logSize); break;
            case "kill": kill(dir, out, logSize); break;
            case "recover": recover(dir, out, logSize); break;
            case "xa": xa(dir, out, logSize); break;
            case "gc": gc(dir, out, logSize); break;
            case "bulk": bulk(dir, out, logSize); break;
            case "phase": phase(dir, out, logSize); break;
            case "subs": subs(dir, out, logSize); break;
            default: throw new IllegalArgumentException(mode);
        }
        System.exit(0);
    }
}
