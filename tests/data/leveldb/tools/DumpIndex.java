import java.io.File;
import java.nio.file.*;
import java.util.*;
import org.iq80.leveldb.*;
import org.iq80.leveldb.impl.Iq80DBFactory;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;

/**
 * The logical content of a LevelDB index (every key and value, in key order) as the broker's own iq80 LevelDB
 * reads it, from a private copy (opening a LevelDB writes to it).
 *   DumpIndex <indexDir> <out.json>
 * Output: {"index": name, "entries": n, "records": [{"key": hex, "value": hex}, ...]}
 */
public class DumpIndex {
    static String hex(byte[] b) { StringBuilder s = new StringBuilder(); for (byte x : b) s.append(String.format("%02x", x)); return s.toString(); }

    public static void main(String[] args) throws Exception {
        Path src = Paths.get(args[0]);
        Path copy = Files.createTempDirectory("dumpindex-");
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(src)) {
            for (Path p : ds) if (!p.getFileName().toString().equals("LOCK")) Files.copy(p, copy.resolve(p.getFileName()));
        }
        List<Map<String, String>> recs = new ArrayList<>();
        Options o = new Options(); o.createIfMissing(false);
        try (DB db = Iq80DBFactory.factory.open(copy.toFile(), o); DBIterator it = db.iterator()) {
            for (it.seekToFirst(); it.hasNext(); ) {
                Map.Entry<byte[], byte[]> e = it.next();
                Map<String, String> r = new LinkedHashMap<>();
                r.put("key", hex(e.getKey())); r.put("value", hex(e.getValue()));
                recs.add(r);
            }
        }
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(copy)) { for (Path p : ds) Files.delete(p); }
        Files.delete(copy);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("index", src.getFileName().toString());
        out.put("entries", recs.size());
        out.put("records", recs);
        new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT).writeValue(new File(args[1]), out);
    }
}
