package org.apache.activemq.artemis.utils;

import java.io.Reader;

import org.apache.activemq.artemis.json.JsonArray;
import org.apache.activemq.artemis.json.JsonArrayBuilder;
import org.apache.activemq.artemis.json.JsonObject;
import org.apache.activemq.artemis.json.JsonObjectBuilder;

/** Compile-time stand-in: the store writer never renders JSON, and Debian has no javax.json provider. */
public class JsonLoader {
   public static JsonObject readObject(Reader reader) { throw new UnsupportedOperationException("json"); }
   public static JsonArray readArray(Reader reader) { throw new UnsupportedOperationException("json"); }
   public static JsonArrayBuilder createArrayBuilder() { throw new UnsupportedOperationException("json"); }
   public static JsonObjectBuilder createObjectBuilder() { throw new UnsupportedOperationException("json"); }
}
