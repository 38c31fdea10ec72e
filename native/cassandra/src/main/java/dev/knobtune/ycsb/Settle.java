package dev.knobtune.ycsb;

import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.DriverException;
import com.datastax.oss.driver.api.core.cql.Row;
import java.util.Set;

/**
 * Waits until the node has no flush and no compaction running or queued: the work a run left behind.
 *
 * <pre>
 * java -cp 'client/*' dev.knobtune.ycsb.Settle -p cassandra.port=N [--wait-s LIMIT]
 * </pre>
 *
 * <p>Polls {@code system_views.thread_pools} every 100 ms (there is no JMX here, so no nodetool):
 * the node is settled when the active and pending tasks of its flush and compaction pools are all
 * zero in three polls in a row. Prints {@code settle: idle after N ms}, counted from the first
 * poll (the client's own start and connection are not the node's work). Takes the properties and
 * {@code --wait-s} of {@link Schema} ({@code --wait-s} is the limit here; 0: none).
 *
 * <p>Exit codes: 0 settled; 1 the node did not answer; 2 bad arguments; 5 still busy at the limit
 * (the last line says with what).
 */
public final class Settle {

  static final int EXIT_BUSY = 5;
  private static final Set<String> POOLS = Set.of("CompactionExecutor", "MemtableFlushWriter", "MemtablePostFlush");
  private static final long POLL_MS = 100;
  private static final int QUIET_POLLS = 3;

  private Settle() {}

  public static void main(String[] args) {
    try {
      Schema.Arguments arguments = Schema.parse(args);
      try (CqlSession session = Sessions.open(ClientSettings.from(arguments.properties()))) {
        long start = System.nanoTime();
        long limit = (long) (arguments.waitSeconds() * 1e9);
        int quiet = 0;
        while (quiet < QUIET_POLLS) {
          String busy = busy(session);
          quiet = busy.isEmpty() ? quiet + 1 : 0;
          if (!busy.isEmpty() && limit > 0 && System.nanoTime() - start > limit) {
            System.out.printf("settle: still busy after %d ms: %s%n", (System.nanoTime() - start) / 1_000_000, busy);
            System.exit(EXIT_BUSY);
          }
          Thread.sleep(POLL_MS);
        }
        long waited = (System.nanoTime() - start) / 1_000_000 - (QUIET_POLLS - 1) * POLL_MS;
        System.out.printf("settle: idle after %d ms%n", Math.max(0, waited));
      }
      System.exit(Schema.EXIT_OK);
    } catch (Schema.SchemaException e) {
      System.out.println("settle: error: " + e.getMessage());
      System.exit(e.exitCode);
    } catch (DriverException e) {
      System.out.println("settle: error: the node did not answer: " + e.getMessage()
          + " Fix: check that it runs on cassandra.port.");
      System.exit(Schema.EXIT_SERVER);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      System.exit(Schema.EXIT_SERVER);
    }
  }

  /** The flush and compaction pools with work, as "pool active+pending", or "" when all are idle. */
  static String busy(CqlSession session) {
    StringBuilder busy = new StringBuilder();
    for (Row row : session.execute("SELECT name, active_tasks, pending_tasks FROM system_views.thread_pools")) {
      String name = row.getString("name");
      if (!POOLS.contains(name)) {
        continue;
      }
      long active = ((Number) row.getObject("active_tasks")).longValue();
      long pending = ((Number) row.getObject("pending_tasks")).longValue();
      if (active + pending > 0) {
        busy.append(busy.length() == 0 ? "" : ", ").append(name).append(' ').append(active).append('+').append(pending);
      }
    }
    return busy.toString();
  }
}
