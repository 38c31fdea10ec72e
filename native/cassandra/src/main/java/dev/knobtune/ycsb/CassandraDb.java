package dev.knobtune.ycsb;

import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.DriverException;
import com.datastax.oss.driver.api.core.cql.BoundStatement;
import com.datastax.oss.driver.api.core.cql.ColumnDefinition;
import com.datastax.oss.driver.api.core.cql.PreparedStatement;
import com.datastax.oss.driver.api.core.cql.ResultSet;
import com.datastax.oss.driver.api.core.cql.Row;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.Vector;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;
import site.ycsb.StringByteIterator;

/**
 * YCSB binding for Cassandra over the Apache Cassandra Java driver 4.x.
 *
 * <p>The table is the one {@link Schema} creates: {@code y_id text PRIMARY KEY} plus one text
 * column per YCSB field. YCSB makes one instance per client thread; all instances share one
 * session and one cache of prepared statements (keyed by their CQL text, so one statement per
 * operation and field set). Properties: see {@link ClientSettings}.
 *
 * <p>Outcomes: a read of a missing row returns {@link Status#NOT_FOUND}, so YCSB counts it as a
 * failed read (and, with {@code dataintegrity=true}, as a failed VERIFY); any driver error
 * (timeout, unavailable, overloaded, lost connection) returns {@link Status#ERROR}, and the first
 * {@value #PRINTED_ERRORS_MAX} are printed to stderr.
 */
public class CassandraDb extends DB {

  private static final int PRINTED_ERRORS_MAX = 10;

  private static final Object LOCK = new Object();
  private static CqlSession sharedSession;
  private static ClientSettings sharedSettings;
  private static int openInstances;
  private static final Map<String, PreparedStatement> STATEMENTS = new ConcurrentHashMap<>();
  private static final AtomicLong ERRORS = new AtomicLong();

  private CqlSession session;
  private ClientSettings settings;

  @Override
  public void init() throws DBException {
    synchronized (LOCK) {
      if (sharedSession == null) {
        try {
          sharedSettings = ClientSettings.from(getProperties());
          sharedSession = Sessions.open(sharedSettings);
        } catch (IllegalArgumentException | DriverException e) {
          throw new DBException("CassandraDb: " + e.getMessage(), e);
        }
      }
      openInstances++;
      session = sharedSession;
      settings = sharedSettings;
    }
  }

  @Override
  public void cleanup() throws DBException {
    synchronized (LOCK) {
      openInstances--;
      if (openInstances == 0 && sharedSession != null) {
        sharedSession.close();
        sharedSession = null;
        STATEMENTS.clear();
      }
    }
  }

  @Override
  public Status read(String table, String key, Set<String> fields, Map<String, ByteIterator> result) {
    String cql = "SELECT " + columnList(fields) + " FROM " + settings.qualifiedTable()
        + " WHERE " + ClientSettings.KEY_COLUMN + " = ?";
    try {
      Row row = session.execute(prepared(cql).bind(key)).one();
      if (row == null) {
        return Status.NOT_FOUND;
      }
      putFields(row, result);
      return Status.OK;
    } catch (DriverException e) {
      return failed("read", key, e);
    }
  }

  /** Rows whose key's token is at or after the start key's, in token order (Murmur3 order, not key order). */
  @Override
  public Status scan(String table, String startKey, int recordCount, Set<String> fields,
                     Vector<HashMap<String, ByteIterator>> result) {
    String key = ClientSettings.KEY_COLUMN;
    String cql = "SELECT " + columnList(fields) + " FROM " + settings.qualifiedTable()
        + " WHERE token(" + key + ") >= token(?) LIMIT ?";
    try {
      ResultSet rows = session.execute(prepared(cql).bind(startKey, recordCount));
      for (Row row : rows) {
        HashMap<String, ByteIterator> values = new HashMap<>();
        putFields(row, values);
        result.add(values);
      }
      return Status.OK;
    } catch (DriverException e) {
      return failed("scan", startKey, e);
    }
  }

  /** An upsert, as every Cassandra write is: updating a missing row creates it. */
  @Override
  public Status update(String table, String key, Map<String, ByteIterator> values) {
    List<String> names = new ArrayList<>(new TreeSet<>(values.keySet()));
    StringBuilder cql = new StringBuilder("UPDATE ").append(settings.qualifiedTable()).append(" SET ");
    for (int i = 0; i < names.size(); i++) {
      cql.append(i == 0 ? "" : ", ").append(ClientSettings.cql(names.get(i))).append(" = ?");
    }
    cql.append(" WHERE ").append(ClientSettings.KEY_COLUMN).append(" = ?");
    return write("update", key, cql.toString(), names, values, false);
  }

  @Override
  public Status insert(String table, String key, Map<String, ByteIterator> values) {
    List<String> names = new ArrayList<>(new TreeSet<>(values.keySet()));
    StringBuilder cql = new StringBuilder("INSERT INTO ").append(settings.qualifiedTable())
        .append(" (").append(ClientSettings.KEY_COLUMN);
    for (String name : names) {
      cql.append(", ").append(ClientSettings.cql(name));
    }
    cql.append(") VALUES (?").append(", ?".repeat(names.size())).append(")");
    return write("insert", key, cql.toString(), names, values, true);
  }

  @Override
  public Status delete(String table, String key) {
    String cql = "DELETE FROM " + settings.qualifiedTable() + " WHERE " + ClientSettings.KEY_COLUMN + " = ?";
    try {
      session.execute(prepared(cql).bind(key));
      return Status.OK;
    } catch (DriverException e) {
      return failed("delete", key, e);
    }
  }

  /** Binds the key first (INSERT) or last (UPDATE ... WHERE), the values in {@code names}' order. */
  private Status write(String operation, String key, String cql, List<String> names,
                       Map<String, ByteIterator> values, boolean keyFirst) {
    Object[] bound = new Object[names.size() + 1];
    int offset = keyFirst ? 1 : 0;
    for (int i = 0; i < names.size(); i++) {
      bound[i + offset] = values.get(names.get(i)).toString();
    }
    bound[keyFirst ? 0 : names.size()] = key;
    try {
      BoundStatement statement = prepared(cql).bind(bound);
      session.execute(statement);
      return Status.OK;
    } catch (DriverException e) {
      return failed(operation, key, e);
    }
  }

  /** Prepares outside the map's lock: two threads may both prepare once; the server dedupes. */
  private PreparedStatement prepared(String cql) {
    PreparedStatement statement = STATEMENTS.get(cql);
    if (statement == null) {
      statement = session.prepare(cql);
      PreparedStatement earlier = STATEMENTS.putIfAbsent(cql, statement);
      if (earlier != null) {
        statement = earlier;
      }
    }
    return statement;
  }

  /** "*" for all columns, else the fields in a stable order (so one field set, one statement). */
  private static String columnList(Set<String> fields) {
    if (fields == null) {
      return "*";
    }
    StringBuilder columns = new StringBuilder();
    for (String field : new TreeSet<>(fields)) {
      columns.append(columns.length() == 0 ? "" : ", ").append(ClientSettings.cql(field));
    }
    return columns.toString();
  }

  /** Copies the row's non-null field columns (not the key) into YCSB's map. */
  private static void putFields(Row row, Map<String, ByteIterator> result) {
    for (ColumnDefinition column : row.getColumnDefinitions()) {
      String name = column.getName().asInternal();
      if (name.equals(ClientSettings.KEY_COLUMN)) {
        continue;
      }
      String value = row.getString(column.getName());
      if (value != null) {
        result.put(name, new StringByteIterator(value));
      }
    }
  }

  private static Status failed(String operation, String key, DriverException error) {
    long count = ERRORS.incrementAndGet();
    if (count <= PRINTED_ERRORS_MAX) {
      System.err.printf("CassandraDb: %s of %s failed: %s: %s%s%n", operation, key,
          error.getClass().getSimpleName(), error.getMessage(),
          count == PRINTED_ERRORS_MAX ? " (further errors are counted by YCSB, not printed)" : "");
    }
    return Status.ERROR;
  }
}
