package dev.knobtune.ycsb;

import com.datastax.oss.driver.api.core.CqlIdentifier;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Properties;

/**
 * What the client needs to know, read once from YCSB's properties.
 *
 * <p>Properties (defaults in brackets): {@code cassandra.host} [127.0.0.1], {@code cassandra.port}
 * [9042], {@code cassandra.keyspace} [ycsb], {@code cassandra.table} [YCSB's {@code table}, else
 * usertable], {@code cassandra.request_timeout_ms} [2000, the driver's own default],
 * {@code cassandra.connect_timeout_ms} [5000]; and YCSB's own {@code fieldcount} [10] and
 * {@code fieldnameprefix} [field], so the table has the columns CoreWorkload writes.
 */
record ClientSettings(
    String host,
    int port,
    String keyspace,
    String table,
    List<String> fieldNames,
    Duration requestTimeout,
    Duration connectTimeout) {

  static final String HOST = "cassandra.host";
  static final String PORT = "cassandra.port";
  static final String KEYSPACE = "cassandra.keyspace";
  static final String TABLE = "cassandra.table";
  static final String REQUEST_TIMEOUT_MS = "cassandra.request_timeout_ms";
  static final String CONNECT_TIMEOUT_MS = "cassandra.connect_timeout_ms";
  /** YCSB CoreWorkload's own property names. */
  static final String YCSB_TABLE = "table";
  static final String YCSB_FIELD_COUNT = "fieldcount";
  static final String YCSB_FIELD_NAME_PREFIX = "fieldnameprefix";

  /** The partition key column. */
  static final String KEY_COLUMN = "y_id";

  /**
   * Reads and checks the settings.
   *
   * @throws IllegalArgumentException naming the property, its value and the fix
   */
  static ClientSettings from(Properties properties) {
    String table = properties.getProperty(TABLE);
    String ycsbTable = properties.getProperty(YCSB_TABLE);
    if (table != null && ycsbTable != null && !table.equals(ycsbTable)) {
      throw new IllegalArgumentException(String.format(
          "%s=%s but YCSB's %s=%s: CoreWorkload would name one table and the client use the other."
              + " Fix: set only one of them, or both to the same name.",
          TABLE, table, YCSB_TABLE, ycsbTable));
    }
    if (table == null) {
      table = ycsbTable != null ? ycsbTable : "usertable";
    }
    String prefix = properties.getProperty(YCSB_FIELD_NAME_PREFIX, "field");
    int fieldCount = positiveInt(properties, YCSB_FIELD_COUNT, 10);
    List<String> fieldNames = new ArrayList<>(fieldCount);
    for (int i = 0; i < fieldCount; i++) {
      fieldNames.add(prefix + i);
    }
    return new ClientSettings(
        properties.getProperty(HOST, "127.0.0.1"),
        positiveInt(properties, PORT, 9042),
        properties.getProperty(KEYSPACE, "ycsb"),
        table,
        Collections.unmodifiableList(fieldNames),
        Duration.ofMillis(positiveInt(properties, REQUEST_TIMEOUT_MS, 2000)),
        Duration.ofMillis(positiveInt(properties, CONNECT_TIMEOUT_MS, 5000)));
  }

  /** The table's name as CQL wants it: keyspace-qualified, quoted where needed. */
  String qualifiedTable() {
    return cql(keyspace) + "." + cql(table);
  }

  /** An identifier as CQL wants it, quoted only where needed (upper case, odd characters). */
  static String cql(String identifier) {
    return CqlIdentifier.fromInternal(identifier).asCql(true);
  }

  private static int positiveInt(Properties properties, String name, int fallback) {
    String text = properties.getProperty(name);
    if (text == null) {
      return fallback;
    }
    try {
      int value = Integer.parseInt(text.trim());
      if (value > 0) {
        return value;
      }
    } catch (NumberFormatException ignored) {
      // reported below, with the property's name
    }
    throw new IllegalArgumentException(String.format(
        "%s=%s is not a positive whole number. Fix: give e.g. %s=%d.", name, text, name, fallback));
  }
}
