import java.io.*;
import java.util.*;
import javax.jms.*;
import org.apache.activemq.ActiveMQConnection;
import org.apache.activemq.broker.BrokerService;
import org.apache.activemq.command.ActiveMQQueue;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * A seeded random workload on a real LevelDBStore (lane lv51), built on Gen's broker set-up.
 *   Mix <storeDir> <events.jsonl> <logSize> <seed> <rounds>     (rounds 0: until SIGKILLed)
 * Several queues and topics, durable subscribers with selectors (some created late, some unsubscribed),
 * transacted sends and consumes committed and rolled back, client-ack consumes, large messages,
 * a queue destroyed, non-persistent sends; every step logged as a JSON line.
 * -Dmix.gcWaitMs=N: after the rounds, wait N ms for the store's GC before the clean stop.
 */
public class Mix {
    static final ObjectMapper J = new ObjectMapper();
    static PrintStream ev;
    static void log(Object... kv) throws Exception {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) m.put((String) kv[i], kv[i + 1]);
        synchronized (ev) { ev.println(J.writeValueAsString(m)); }
    }

    static final String[] SELECTORS = {null, "color = 'red'", "n > 40", "color IN ('red','green') AND n < 70",
        "kind = 'none'", "n >= 10 AND n < 20", "color <> 'blue'"};
    static final String[] COLORS = {"red", "blue", "green"};

    public static void main(String[] args) throws Exception {
        File dir = new File(args[0]);
        ev = new PrintStream(new FileOutputStream(args[1], true), true, "UTF-8");
        long logSize = Long.parseLong(args[2]);
        long seed = Long.parseLong(args[3]);
        int rounds = Integer.parseInt(args[4]);
        Random r = new Random(seed);
        BrokerService broker = Gen.startBroker(dir, logSize);
        int nq = 2 + r.nextInt(4), nt = 1 + r.nextInt(3);
        List<String> queues = new ArrayList<>(), topics = new ArrayList<>();
        for (int i = 0; i < nq; i++) queues.add("MQ" + seed % 1000 + "." + i);
        for (int i = 0; i < nt; i++) topics.add("MT" + seed % 1000 + "." + i);
        String[] clients = {"mixA", "mixB"};
        Map<String, Connection> conns = new HashMap<>();
        for (String c : clients) conns.put(c, Gen.connect(c));
        Connection plain = Gen.connect(null);
        Session s = plain.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Session ts = plain.createSession(true, Session.SESSION_TRANSACTED);
        Session cs = plain.createSession(false, Session.CLIENT_ACKNOWLEDGE);
        MessageProducer p = s.createProducer(null), tp = ts.createProducer(null);
        // durable subs: topic -> list of [client, name, selector]
        List<String[]> subs = new ArrayList<>();
        int subNo = 0;
        for (String t : topics) {
            int k = 1 + r.nextInt(3);
            for (int i = 0; i < k; i++) subNo = newSub(r, conns, subs, t, clients, subNo);
        }
        log("event", "setup", "seed", seed, "queues", queues, "topics", topics, "subs", subs, "logSize", logSize);
        int seq = 0;
        for (int round = 0; rounds == 0 || round < rounds; round++) {
            int what = r.nextInt(100);
            if (what < 35) {                                        // plain sends
                String d = pick(r, queues, topics);
                int k = 1 + r.nextInt(12);
                for (int i = 0; i < k; i++) { Message m = make(r, s, seq); send(p, s, d, m, r); log("event", "send_ok", "dest", d, "seq", seq++, "id", m.getJMSMessageID()); }
            } else if (what < 47) {                                 // transacted send, commit or roll back
                String d = pick(r, queues, topics);
                int k = 1 + r.nextInt(8);
                List<String> ids = new ArrayList<>();
                for (int i = 0; i < k; i++) { Message m = make(r, ts, seq++); send(tp, ts, d, m, r); ids.add(m.getJMSMessageID()); }
                boolean commit = r.nextInt(3) > 0;
                if (commit) ts.commit(); else ts.rollback();
                log("event", commit ? "tx_send_commit" : "tx_send_rollback", "dest", d, "ids", ids);
            } else if (what < 62) {                                 // consume from a queue: auto, client ack, tx
                String q = queues.get(r.nextInt(queues.size()));
                int mode = r.nextInt(3), k = 1 + r.nextInt(6);
                Session us = mode == 0 ? s : mode == 1 ? cs : ts;
                MessageConsumer c = us.createConsumer(us.createQueue(q));
                List<String> ids = new ArrayList<>(); Message last = null;
                for (int i = 0; i < k; i++) { Message m = c.receive(300); if (m == null) break; ids.add(m.getJMSMessageID()); last = m; }
                String how = "auto";
                if (mode == 1) { if (last != null && r.nextInt(4) > 0) { last.acknowledge(); how = "client_ack"; } else how = "client_noack"; }
                if (mode == 2) { if (r.nextInt(3) > 0) { ts.commit(); how = "tx_commit"; } else { ts.rollback(); how = "tx_rollback"; } }
                c.close();
                if (mode == 1 && how.equals("client_noack")) cs.recover();
                log("event", "consume", "dest", q, "how", how, "ids", ids);
            } else if (what < 80 && !subs.isEmpty()) {              // a durable subscriber consumes
                String[] sb = subs.get(r.nextInt(subs.size()));
                Connection cc = conns.get(sb[0]);
                boolean tx = r.nextInt(4) == 0;
                Session ss = cc.createSession(tx, tx ? Session.SESSION_TRANSACTED : Session.AUTO_ACKNOWLEDGE);
                TopicSubscriber ds = ss.createDurableSubscriber(ss.createTopic(sb[3]), sb[1], sb[2], false);
                int k = 1 + r.nextInt(10);
                List<String> ids = new ArrayList<>();
                for (int i = 0; i < k; i++) { Message m = ds.receive(300); if (m == null) break; ids.add(m.getJMSMessageID()); }
                String how = "auto";
                if (tx) { if (r.nextBoolean()) { ss.commit(); how = "tx_commit"; } else { ss.rollback(); how = "tx_rollback"; } }
                ds.close(); ss.close();
                log("event", "durable_consume", "client", sb[0], "sub", sb[1], "how", how, "ids", ids);
            } else if (what < 85) {                                 // a late durable subscriber
                subNo = newSub(r, conns, subs, topics.get(r.nextInt(topics.size())), clients, subNo);
                log("event", "subscribe", "sub", subs.get(subs.size() - 1));
            } else if (what < 89 && subs.size() > 1) {              // unsubscribe one
                String[] sb = subs.remove(r.nextInt(subs.size()));
                Session us = conns.get(sb[0]).createSession(false, Session.AUTO_ACKNOWLEDGE);
                us.unsubscribe(sb[1]); us.close();
                log("event", "unsubscribe", "client", sb[0], "sub", sb[1]);
            } else if (what < 91 && queues.size() > 1) {            // destroy a queue (REMOVE_COLLECTION)
                String q = queues.remove(r.nextInt(queues.size()));
                try { ((ActiveMQConnection) plain).destroyDestination(new ActiveMQQueue(q)); log("event", "destroy", "dest", q); }
                catch (Exception e) { log("event", "destroy_failed", "dest", q, "error", String.valueOf(e)); }
            } else if (what < 94) {                                 // a new queue
                String q = "MQ" + seed % 1000 + ".n" + round;
                queues.add(q);
                log("event", "new_queue", "dest", q);
            } else {                                                // non-persistent sends
                String d = pick(r, queues, topics);
                Message m = make(r, s, seq++);
                p.send(dest(s, d), m, DeliveryMode.NON_PERSISTENT, 4, 0);
                log("event", "send_nonpersistent", "dest", d, "id", m.getJMSMessageID());
            }
            if (rounds == 0 && r.nextInt(10) == 0) Thread.sleep(r.nextInt(30));
        }
        long gcWait = Long.getLong("mix.gcWaitMs", 0);
        if (gcWait > 0) Thread.sleep(gcWait);
        for (Connection c : conns.values()) c.close();
        plain.close();
        broker.stop(); broker.waitUntilStopped();
        log("event", "clean_stop");
        System.exit(0);
    }

    static int newSub(Random r, Map<String, Connection> conns, List<String[]> subs, String t, String[] clients, int no) throws Exception {
        String cl = clients[r.nextInt(clients.length)];
        String sel = SELECTORS[r.nextInt(SELECTORS.length)];
        String name = "s" + no;
        Session ss = conns.get(cl).createSession(false, Session.AUTO_ACKNOWLEDGE);
        ss.createDurableSubscriber(ss.createTopic(t), name, sel, false).close();
        ss.close();
        subs.add(new String[]{cl, name, sel, t});
        return no + 1;
    }

    static String pick(Random r, List<String> qs, List<String> ts) {
        return r.nextInt(3) == 0 ? "topic://" + ts.get(r.nextInt(ts.size())) : "queue://" + qs.get(r.nextInt(qs.size()));
    }

    static Destination dest(Session s, String d) throws Exception {
        return d.startsWith("queue://") ? s.createQueue(d.substring(8)) : s.createTopic(d.substring(8));
    }

    static void send(MessageProducer p, Session s, String d, Message m, Random r) throws Exception {
        p.send(dest(s, d), m, DeliveryMode.PERSISTENT, r.nextInt(10), 0);
    }

    static Message make(Random r, Session s, int seq) throws Exception {
        int kind = r.nextInt(10);
        int size = r.nextInt(20) == 0 ? 20000 + r.nextInt(180000) : r.nextInt(10) == 0 ? 3000 + r.nextInt(9000) : r.nextInt(400);
        Message m;
        if (kind < 6) { StringBuilder b = new StringBuilder("mix #" + seq + " "); for (int i = 0; i < size; i++) b.append((char) ('a' + r.nextInt(26))); m = s.createTextMessage(b.toString()); }
        else if (kind < 8) { BytesMessage bm = s.createBytesMessage(); byte[] b = new byte[size]; r.nextBytes(b); bm.writeBytes(b); m = bm; }
        else if (kind < 9) { MapMessage mm = s.createMapMessage(); mm.setInt("seq", seq); mm.setString("pad", "x".repeat(size)); m = mm; }
        else { m = s.createMessage(); }
        m.setIntProperty("seq", seq);
        m.setIntProperty("n", r.nextInt(100));
        m.setStringProperty("color", COLORS[r.nextInt(3)]);
        if (r.nextInt(5) == 0) m.setJMSCorrelationID("corr-" + seq);
        return m;
    }
}
