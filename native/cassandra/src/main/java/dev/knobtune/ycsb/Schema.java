package dev.knobtune.ycsb;

import com.datastax.oss.driver.api.core.AllNodesFailedException;
import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.DriverException;
import com.datastax.oss.driver.api.core.cql.Row;
import com.datastax.oss.driver.api.core.cql.SimpleStatement;
import java.io.IOException;
import java.io.Reader;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Properties;
import java.util.Set;

/**
 * Creates the keyspace (SimpleStrategy, replication factor 1) and the YCSB table if absent, and
 * checks that an existing table has every column the workload writes.
 *
 * <pre>
 * java -cp 'client/*' dev.knobtune.ycsb.Schema [-P workload.properties]... [-p name=value]...
 *      [--wait-s SECONDS] [--drop]
 * </pre>
 *
 * <p>Takes the same {@code -P}/{@code -p} properties as {@code site.ycsb.Client} (later ones win),
 * so one properties file serves both; see {@link ClientSettings}. {@code --wait-s} waits that long
 * for the node to answer (it may still be starting) and prints how long it took;
 * {@code --drop} drops the keyspace first, for a fresh load.
 *
 * <p>Exit codes: 0 ready; 1 the server did not answer or refused a statement; 2 bad arguments or
 * properties, or an existing table lacks columns. Every failure prints one line starting with
 * "schema: error:" that ends with "Fix: ...".
 */
public final class Schema {

  static final int EXIT_OK = 0;
  static final int EXIT_SERVER = 1;
  static final int EXIT_USAGE = 2;

  private static final long PORT_POLL_MS = 100;
  private static final Duration DDL_TIMEOUT = Duration.ofSeconds(60);

  private Schema() {}

  /** Why the schema could not be made ready, with the exit code to report. */
  static final class SchemaException extends Exception {
    private static final long serialVersionUID = 1L;
    final int exitCode;

    SchemaException(int exitCode, String message) {
      super(message);
      this.exitCode = exitCode;
    }
  }

  /** The command line, parsed. */
  record Arguments(Properties properties, double waitSeconds, boolean drop) {}

  public static void main(String[] args) {
    try {
      Arguments arguments = parse(args);
      ClientSettings settings = ClientSettings.from(arguments.properties());
      long startNanos = System.nanoTime();
      try (CqlSession session = connect(settings, arguments.waitSeconds())) {
        long connectedMs = (System.nanoTime() - startNanos) / 1_000_000;
        String version = session.execute("SELECT release_version FROM system.local").one().getString(0);
        System.out.printf("schema: connected to Cassandra %s at %s:%d after %d ms%n",
            version, settings.host(), settings.port(), connectedMs);
        long ddlStartNanos = System.nanoTime();
        ensure(session, settings, arguments.drop());
        System.out.printf("schema: ready: table %s with %d fields (%d ms)%n", settings.qualifiedTable(),
            settings.fieldNames().size(), (System.nanoTime() - ddlStartNanos) / 1_000_000);
      }
      System.exit(EXIT_OK);
    } catch (SchemaException e) {
      System.err.println("schema: error: " + e.getMessage());
      System.exit(e.exitCode);
    } catch (IllegalArgumentException e) {
      System.err.println("schema: error: " + e.getMessage());
      System.exit(EXIT_USAGE);
    } catch (DriverException e) {
      System.err.println("schema: error: the server refused a statement: " + e.getMessage()
          + " Fix: read the server's log.");
      System.exit(EXIT_SERVER);
    }
  }

  static Arguments parse(String[] args) throws SchemaException {
    Properties properties = new Properties();
    double waitSeconds = 0;
    boolean drop = false;
    for (int i = 0; i < args.length; i++) {
      String arg = args[i];
      switch (arg) {
        case "-P" -> loadFile(properties, Path.of(value(args, ++i, arg)));
        case "-p" -> {
          String pair = value(args, ++i, arg);
          int equals = pair.indexOf('=');
          if (equals <= 0) {
            throw new SchemaException(EXIT_USAGE, "-p " + pair + " is not name=value. Fix: e.g. -p cassandra.port=9042.");
          }
          properties.setProperty(pair.substring(0, equals), pair.substring(equals + 1));
        }
        case "--wait-s" -> waitSeconds = nonNegative(value(args, ++i, arg), arg);
        case "--drop" -> drop = true;
        default -> throw new SchemaException(EXIT_USAGE, "unknown argument " + arg
            + ". Fix: use -P FILE, -p NAME=VALUE, --wait-s SECONDS, --drop.");
      }
    }
    return new Arguments(properties, waitSeconds, drop);
  }

  private static String value(String[] args, int index, String option) throws SchemaException {
    if (index >= args.length) {
      throw new SchemaException(EXIT_USAGE, option + " needs a value. Fix: e.g. " + option + " "
          + (option.equals("-P") ? "workload.properties" : option.equals("-p") ? "fieldcount=10" : "60") + ".");
    }
    return args[index];
  }

  private static double nonNegative(String text, String option) throws SchemaException {
    try {
      double value = Double.parseDouble(text);
      if (value >= 0) {
        return value;
      }
    } catch (NumberFormatException ignored) {
      // reported below
    }
    throw new SchemaException(EXIT_USAGE, option + " " + text + " is not a number of seconds >= 0. Fix: e.g. " + option + " 60.");
  }

  private static void loadFile(Properties properties, Path file) throws SchemaException {
    try (Reader reader = Files.newBufferedReader(file)) {
      properties.load(reader);
    } catch (IOException e) {
      throw new SchemaException(EXIT_USAGE, "cannot read properties file " + file + ": " + e
          + ". Fix: give an existing file to -P.");
    }
  }

  /**
   * Connects, waiting up to {@code waitSeconds} for the node to answer: the native port is polled
   * every 100 ms (cheap and quiet), and a session is opened once it accepts connections.
   */
  static CqlSession connect(ClientSettings settings, double waitSeconds) throws SchemaException {
    long deadlineNanos = System.nanoTime() + (long) (waitSeconds * 1e9);
    String lastFailure = "port closed";
    while (true) {
      if (portAccepts(settings.host(), settings.port())) {
        try {
          return Sessions.open(settings);
        } catch (AllNodesFailedException e) {
          lastFailure = firstLine(e.getMessage());
        }
      }
      if (System.nanoTime() >= deadlineNanos) {
        throw new SchemaException(EXIT_SERVER, String.format(
            "no answer from %s:%d within %.1f s (%s). Fix: start the server, check %s, or raise --wait-s.",
            settings.host(), settings.port(), waitSeconds, lastFailure, ClientSettings.PORT));
      }
      sleep(PORT_POLL_MS);
    }
  }

  private static boolean portAccepts(String host, int port) {
    try (Socket socket = new Socket()) {
      socket.connect(new InetSocketAddress(host, port), (int) PORT_POLL_MS);
      return true;
    } catch (IOException e) {
      return false;
    }
  }

  static void ensure(CqlSession session, ClientSettings settings, boolean drop) throws SchemaException {
    String keyspace = ClientSettings.cql(settings.keyspace());
    if (drop) {
      ddl(session, "DROP KEYSPACE IF EXISTS " + keyspace);
    }
    ddl(session, "CREATE KEYSPACE IF NOT EXISTS " + keyspace
        + " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}");
    StringBuilder table = new StringBuilder("CREATE TABLE IF NOT EXISTS ").append(settings.qualifiedTable())
        .append(" (").append(ClientSettings.KEY_COLUMN).append(" text PRIMARY KEY");
    for (String field : settings.fieldNames()) {
      table.append(", ").append(ClientSettings.cql(field)).append(" text");
    }
    ddl(session, table.append(")").toString());
    List<String> missing = missingColumns(session, settings);
    if (!missing.isEmpty()) {
      throw new SchemaException(EXIT_USAGE, String.format(
          "table %s exists without the columns %s that fieldcount=%d asks for."
              + " Fix: run again with --drop, or set fieldcount to match the table.",
          settings.qualifiedTable(), missing, settings.fieldNames().size()));
    }
  }

  /** Schema changes flush tables and may take seconds on a busy machine: more than a request's 2 s. */
  private static void ddl(CqlSession session, String cql) {
    session.execute(SimpleStatement.newInstance(cql).setTimeout(DDL_TIMEOUT));
  }

  private static List<String> missingColumns(CqlSession session, ClientSettings settings) {
    Set<String> present = new HashSet<>();
    for (Row row : session.execute(session.prepare(
            "SELECT column_name FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?")
        .bind(settings.keyspace(), settings.table()))) {
      present.add(row.getString(0));
    }
    List<String> missing = new ArrayList<>();
    if (!present.contains(ClientSettings.KEY_COLUMN)) {
      missing.add(ClientSettings.KEY_COLUMN);
    }
    for (String field : settings.fieldNames()) {
      if (!present.contains(field)) {
        missing.add(field);
      }
    }
    return missing;
  }

  private static String firstLine(String text) {
    if (text == null) {
      return "no reason given";
    }
    int newline = text.indexOf('\n');
    return newline < 0 ? text : text.substring(0, newline);
  }

  private static void sleep(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
