import java.io.File;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

import org.apache.activemq.artemis.api.core.ActiveMQBuffer;
import org.apache.activemq.artemis.api.core.ActiveMQBuffers;
import org.apache.activemq.artemis.api.core.Message;
import org.apache.activemq.artemis.api.core.SimpleString;
import org.apache.activemq.artemis.core.io.nio.NIOSequentialFileFactory;
import org.apache.activemq.artemis.core.journal.EncodingSupport;
import org.apache.activemq.artemis.core.journal.PreparedTransactionInfo;
import org.apache.activemq.artemis.core.journal.RecordInfo;
import org.apache.activemq.artemis.core.journal.impl.JournalImpl;
import org.apache.activemq.artemis.core.message.impl.CoreMessage;
import org.apache.activemq.artemis.core.message.impl.CoreMessagePersister;
import org.apache.activemq.artemis.core.transaction.impl.XidImpl;
import org.apache.activemq.artemis.utils.XidCodecSupport;

/**
 * Drives the real Artemis JournalImpl with a seeded random broker-like workload on a message journal, so that
 * amqtool can be tried on journals it never wrote: core messages (ADD_MESSAGE_PROTOCOL 45) routed by
 * references (ADD_REF 32 updates), delivery-count updates (34), acknowledgements (ACKNOWLEDGE_REF 33) and
 * deletes, in and out of transactions (committed, rolled back, prepared with an Xid, left open), with
 * Artemis' own compaction mid-run. The queue ids are those of a real broker's bindings journal that the
 * caller copies beside it.
 *
 * usage: java -Dpool=N -DmaxBody=B Writer DIR FILESIZE SEED OPS COMPACT_EVERY BUFFERED QUEUES
 * (QUEUES: "4:orders,9:events,11:events"; pool: journal-pool-files, 10 by default; maxBody: bytes;
 * txPct: share of operations that are transactions, 20 by default; restart=R: every R operations the journal is
 * stopped and a new JournalImpl loads it, as a broker restart does, the writer's own state kept; pairPct: share of
 * transactions that are two sending at once, the second rolled back a few operations later, 0 by default)
 * With OPS = 0 it writes until killed (for SIGKILLed stores), printing "READY" once 200 ops are written.
 */
public class Writer {
   static final byte ADD_MESSAGE_PROTOCOL = 45, ADD_REF = 32, ACKNOWLEDGE_REF = 33, UPDATE_DELIVERY_COUNT = 34;

   static byte[] queueRef(long queue) {
      return ByteBuffer.allocate(8).order(ByteOrder.BIG_ENDIAN).putLong(queue).array();
   }

   static byte[] deliveryCount(long queue, int count) {
      return ByteBuffer.allocate(12).order(ByteOrder.BIG_ENDIAN).putLong(queue).putInt(count).array();
   }

   static final class XidData implements EncodingSupport {
      final XidImpl xid;
      XidData(XidImpl xid) { this.xid = xid; }
      public int getEncodeSize() { return XidCodecSupport.getXidEncodeLength(xid); }
      public void encode(ActiveMQBuffer buffer) { XidCodecSupport.encodeXid(xid, buffer); }
      public void decode(ActiveMQBuffer buffer) { throw new UnsupportedOperationException(); }
   }

   long nextId = 2147483648L + 100;
   static final boolean PIN = Boolean.getBoolean("pin");  // the first messages stay: an old file kept
   static final int PACE = Integer.getInteger("pace", 0);
   static final int SEND_PCT = Integer.getInteger("sendPct", 45);
   static final int TX_PCT = Integer.getInteger("txPct", 20);
   static final int RESTART = Integer.getInteger("restart", 0);
   // share of transactions that are two sending at once (0: none, the RNG draws as before): see pair()
   static final int PAIR_PCT = Integer.getInteger("pairPct", 0);
   Long openB;  // pair(): the second transaction, still open
   int rollbackIn;  // operations until openB is rolled back
   int maxBody = Integer.getInteger("maxBody", 1 << 20);
   final Random rnd;
   JournalImpl journal;
   final Map<String, List<Long>> addresses = new LinkedHashMap<>();
   // message id -> queues still holding a reference
   final Map<Long, List<Long>> live = new HashMap<>();
   final List<Long> liveIds = new ArrayList<>();
   final Map<Long, Integer> deliveries = new HashMap<>();

   Writer(JournalImpl journal, Random rnd) { this.journal = journal; this.rnd = rnd; }

   CoreMessage message(long id, String address) {
      CoreMessage m = new CoreMessage(id, 256);
      m.setAddress(SimpleString.toSimpleString(address));
      m.setDurable(true);
      m.setType(Message.TEXT_TYPE);
      m.setTimestamp(1700000000000L + id % 100000);
      m.putStringProperty("seq", Long.toString(id));
      if (rnd.nextInt(4) == 0) m.putIntProperty("prio", rnd.nextInt(10));
      int n = rnd.nextInt(10) == 0 ? Math.min(maxBody, 2000 + rnd.nextInt(30000)) : rnd.nextInt(Math.min(600, maxBody));
      StringBuilder sb = new StringBuilder(n);
      for (int i = 0; i < n; i++) sb.append((char) ('a' + rnd.nextInt(26)));
      m.getBodyBuffer().writeNullableSimpleString(SimpleString.toSimpleString(sb.toString()));
      return m;
   }

   String randomAddress() {
      List<String> names = new ArrayList<>(addresses.keySet());
      return names.get(rnd.nextInt(names.size()));
   }

   void send(Long tx) throws Exception {
      long id = nextId++;
      String address = randomAddress();
      CoreMessage m = message(id, address);
      if (tx == null) journal.appendAddRecord(id, ADD_MESSAGE_PROTOCOL, CoreMessagePersister.getInstance(), m, false);
      else journal.appendAddRecordTransactional(tx, id, ADD_MESSAGE_PROTOCOL, CoreMessagePersister.getInstance(), m);
      List<Long> queues = new ArrayList<>(addresses.get(address));
      for (long q : queues) {
         if (tx == null) journal.appendUpdateRecord(id, ADD_REF, queueRef(q), false);
         else journal.appendUpdateRecordTransactional(tx, id, ADD_REF, queueRef(q));
      }
      if (tx == null) { live.put(id, queues); if (!(PIN && id < 2147483648L + 103)) liveIds.add(id); } else { pendingSends.put(id, queues); }
   }

   final Map<Long, List<Long>> pendingSends = new LinkedHashMap<>();

   /** Acknowledges one live reference; deletes the message when its last reference goes. */
   void consume(Long tx) throws Exception {
      if (liveIds.isEmpty()) return;
      int at = rnd.nextInt(Math.min(liveIds.size(), 50));  // mostly old messages first, as consumers do
      long id = liveIds.get(at);
      List<Long> queues = live.get(id);
      long q = queues.get(rnd.nextInt(queues.size()));
      if (rnd.nextInt(5) == 0) {
         int c = deliveries.merge(id, 1, Integer::sum);
         journal.appendUpdateRecord(id, UPDATE_DELIVERY_COUNT, deliveryCount(q, c), false);
      }
      if (tx == null) journal.appendUpdateRecord(id, ACKNOWLEDGE_REF, queueRef(q), false);
      else journal.appendUpdateRecordTransactional(tx, id, ACKNOWLEDGE_REF, queueRef(q));
      queues.remove(q);
      if (queues.isEmpty()) {
         if (tx == null) journal.appendDeleteRecord(id, false);
         else journal.appendDeleteRecordTransactional(tx, id);
         live.remove(id);
         liveIds.remove(at);
         deliveries.remove(id);
      }
   }

   /**
    * Two transactions sending at once, as two sessions of a broker do: A sends a message, B is created, the two
    * send in turn (their ids interleave), A commits, and B stays open for a few more operations before it is
    * rolled back (its ROLLBACK lands after A's COMMIT, often in a later file).
    */
   void pair() throws Exception {
      long a = nextId++;
      Map<Long, List<Long>> sentA = new LinkedHashMap<>();
      pendingSends.clear();
      send(a);
      sentA.putAll(pendingSends);
      long b = nextId++;
      int n = 2 + rnd.nextInt(4);
      for (int i = 0; i < n; i++) {
         pendingSends.clear();
         send(b);
         pendingSends.clear();
         send(a);
         sentA.putAll(pendingSends);
      }
      pendingSends.clear();
      journal.appendCommitRecord(a, false);
      for (Map.Entry<Long, List<Long>> e : sentA.entrySet()) { live.put(e.getKey(), e.getValue()); liveIds.add(e.getKey()); }
      openB = b;
      rollbackIn = 3 + rnd.nextInt(20);
   }

   /** Rolls back pair()'s open transaction once its operations have passed. */
   void endPair() throws Exception {
      if (openB != null && --rollbackIn <= 0) {
         journal.appendRollbackRecord(openB, false);
         openB = null;
      }
   }

   void transaction() throws Exception {
      if (PAIR_PCT > 0 && openB == null && rnd.nextInt(100) < PAIR_PCT) {
         pair();
         return;
      }
      long tx = nextId++;
      pendingSends.clear();
      int n = 1 + rnd.nextInt(5);
      boolean sends = rnd.nextBoolean();
      // a rolled-back or unfinished consuming transaction must not change what is live: only sending ones end so
      int end = rnd.nextInt(100);
      if (!sends && end >= 80) end = 0;
      for (int i = 0; i < n; i++) {
         if (sends) send(tx); else consume(tx);
      }
      if (end < 80) {
         journal.appendCommitRecord(tx, false);
         for (Map.Entry<Long, List<Long>> e : pendingSends.entrySet()) { live.put(e.getKey(), e.getValue()); liveIds.add(e.getKey()); }
      } else if (end < 94) {
         journal.appendRollbackRecord(tx, false);
      } else if (end < 98) {
         byte[] gtx = Long.toString(tx).getBytes();
         journal.appendPrepareRecord(tx, new XidData(new XidImpl(new byte[] {1, 2}, 0x1234, gtx)), false);
      }  // else: left open, as a crash leaves it
   }

   static JournalImpl open(NIOSequentialFileFactory factory, int fileSize) throws Exception {
      JournalImpl journal = new JournalImpl(fileSize, 2, Integer.getInteger("pool", 10), 0, 0, factory, "activemq-data", "amq", 1);
      journal.start();
      journal.load(new ArrayList<RecordInfo>(), new ArrayList<PreparedTransactionInfo>(), null);
      return journal;
   }

   public static void main(String[] args) throws Exception {
      File dir = new File(args[0]);
      int fileSize = Integer.parseInt(args[1]);
      long seed = Long.parseLong(args[2]);
      int ops = Integer.parseInt(args[3]);
      int compactEvery = Integer.parseInt(args[4]);
      boolean buffered = Boolean.parseBoolean(args[5]);
      dir.mkdirs();
      NIOSequentialFileFactory factory = buffered ? new NIOSequentialFileFactory(dir, true, 1) : new NIOSequentialFileFactory(dir, 1);
      JournalImpl journal = open(factory, fileSize);
      Writer w = new Writer(journal, new Random(seed));
      for (String spec : args[6].split(",")) {
         String[] kv = spec.split(":");
         w.addresses.computeIfAbsent(kv[1], k -> new ArrayList<>()).add(Long.parseLong(kv[0]));
      }
      for (int i = 0; ops == 0 || i < ops; i++) {
         int r = w.rnd.nextInt(100);
         if (r < SEND_PCT) w.send(null);
         else if (r < 100 - TX_PCT) w.consume(null);
         else w.transaction();
         if (PAIR_PCT > 0) w.endPair();
         if (compactEvery > 0 && i > 0 && i % compactEvery == 0) {
            w.journal.testCompact();
         }
         if (RESTART > 0 && i > 0 && i % RESTART == 0) {
            w.journal.stop();
            w.journal = open(factory, fileSize);
         }
         if (PACE > 0 && i % 20 == 0) Thread.sleep(PACE);  // lets the journal's reclaimer (an executor) run
         if (i == 200 && ops == 0) { System.out.println("READY"); System.out.flush(); }
      }
      w.journal.flush();
      w.journal.stop();
      System.out.println("{\"live\":" + w.live.size() + ",\"nextId\":" + w.nextId + "}");
      System.exit(0);
   }
}
