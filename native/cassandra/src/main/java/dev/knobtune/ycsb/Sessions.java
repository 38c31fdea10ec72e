package dev.knobtune.ycsb;

import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.DefaultConsistencyLevel;
import com.datastax.oss.driver.api.core.config.DefaultDriverOption;
import com.datastax.oss.driver.api.core.config.DriverConfigLoader;
import java.net.InetSocketAddress;

/** Opens driver sessions the way every knobtune client wants them. */
final class Sessions {

  /** SimpleSnitch (and the default GossipingPropertyFileSnitch) put a lone node in this datacenter. */
  static final String LOCAL_DATACENTER = "datacenter1";

  private Sessions() {}

  /**
   * Connects to the one node named by the settings, without choosing a keyspace.
   *
   * <p>Reads and writes run at consistency ONE (the only level a one-node cluster needs, and the
   * cheapest). Thread-safe: a session is meant to be shared by all client threads.
   *
   * @throws com.datastax.oss.driver.api.core.AllNodesFailedException when the node does not answer
   */
  static CqlSession open(ClientSettings settings) {
    DriverConfigLoader config = DriverConfigLoader.programmaticBuilder()
        .withString(DefaultDriverOption.REQUEST_CONSISTENCY, DefaultConsistencyLevel.ONE.name())
        .withDuration(DefaultDriverOption.REQUEST_TIMEOUT, settings.requestTimeout())
        .withDuration(DefaultDriverOption.CONNECTION_CONNECT_TIMEOUT, settings.connectTimeout())
        .withDuration(DefaultDriverOption.CONNECTION_INIT_QUERY_TIMEOUT, settings.connectTimeout())
        // The driver's default 2 s "quiet period" before its event loops stop would be counted in
        // YCSB's run time (each client thread closes its DB inside the timed part).
        .withInt(DefaultDriverOption.NETTY_IO_SHUTDOWN_QUIET_PERIOD, 0)
        .withInt(DefaultDriverOption.NETTY_ADMIN_SHUTDOWN_QUIET_PERIOD, 0)
        .build();
    return CqlSession.builder()
        .addContactPoint(new InetSocketAddress(settings.host(), settings.port()))
        .withLocalDatacenter(LOCAL_DATACENTER)
        .withConfigLoader(config)
        .build();
  }
}
