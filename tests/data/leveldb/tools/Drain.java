import java.io.File;
import javax.jms.*;
import org.apache.activemq.ActiveMQConnectionFactory;
import org.apache.activemq.broker.BrokerService;
import org.apache.activemq.store.leveldb.LevelDBPersistenceAdapter;

/**
 * Drain STORE LOGSIZE QUEUE...: start the broker on STORE (a copy: it is written), consume every queue named until
 * 3 s pass with nothing, print "DRAIN queue n" for each: what the broker's queue cursor hands out, which is not
 * what the store holds when the queue's message count (the collection's size counter) is below its entries
 * (AbstractStoreCursor.fillBatch reads the store only while its size is above 0). Run like Gen (common.sh).
 */
public class Drain {
    public static void main(String[] args) throws Exception {
        BrokerService b = new BrokerService();
        b.setBrokerName("lvl"); b.setUseJmx(false); b.setPersistent(true); b.setSchedulerSupport(false);
        b.setAdvisorySupport(false); b.setDataDirectoryFile(new File(args[0], "broker-data-unused"));
        LevelDBPersistenceAdapter a = new LevelDBPersistenceAdapter();
        a.setDirectory(new File(args[0])); a.setIndexFactory("org.iq80.leveldb.impl.Iq80DBFactory");
        a.setLogSize(Long.parseLong(args[1]));
        b.setPersistenceAdapter(a); b.start(); b.waitUntilStarted();
        ActiveMQConnectionFactory cf = new ActiveMQConnectionFactory("vm://lvl?create=false");
        Connection c = cf.createConnection(); c.start();
        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        for (int i = 2; i < args.length; i++) {
            MessageConsumer mc = s.createConsumer(s.createQueue(args[i]));
            int n = 0; while (mc.receive(3000) != null) n++;
            mc.close();
            System.out.println("DRAIN " + args[i] + " " + n);
        }
        c.close(); b.stop(); b.waitUntilStopped();
    }
}
