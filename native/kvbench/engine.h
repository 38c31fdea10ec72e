// One small interface over the stores kvbench drives; each adapter applies a config map.
#pragma once

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvbench {

// A config the store cannot take: unknown option, bad value (exit 2) or refused at open (exit 3).
struct ConfigError : std::runtime_error {
  ConfigError(const std::string& message, bool refused_at_open)
      : std::runtime_error(message), refused(refused_at_open) {}
  bool refused;
};

struct IoError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class Lookup { kFound, kNotFound };

// put, get, remove and scan are called from several threads at once (a phase's threads share one store):
// they keep no state of their own between calls but counters that are atomics. stats, flush and version are
// called from one thread while no other runs.
class Engine {
 public:
  virtual ~Engine() = default;
  virtual void put(std::string_view key, std::string_view value) = 0;
  virtual Lookup get(std::string_view key) = 0;  // reads the value; does not hand it out
  virtual void remove(std::string_view key) = 0;
  // Seek to `start` and read up to `limit` keys; returns how many were read (0 limit: to the end).
  virtual uint64_t scan(const std::string& start, uint64_t limit) = 0;
  // Seek to the last key at or before `start` (RocksDB's SeekForPrev) and read up to `limit` keys backwards (Prev):
  // a "latest page"; returns how many were read.
  virtual uint64_t scan_reverse(const std::string& start, uint64_t limit) = 0;
  virtual std::string version() const = 0;
  virtual nlohmann::json stats() const { return nlohmann::json::object(); }
  // The options the store was opened with, as this driver handed them to it, for a store that keeps no record of
  // its own (LevelDB); empty for one that does (RocksDB writes its OPTIONS file into the store's folder).
  virtual nlohmann::json options() const { return nlohmann::json::object(); }
  // Write the memtables to table files and wait (a store without such a call: nothing to do).
  virtual void flush() {}
  // Record every operation from now on in `trace` (RocksDB's trace format), after taking a checkpoint of the store
  // into `checkpoint` (empty: none), and each traced seek's Next and Prev calls in `scans` (empty: not;
  // native/scanlog/scan_log.h). A store that cannot trace throws ConfigError.
  virtual void start_trace(const std::string& /*trace*/, const std::string& /*checkpoint*/,
                           const std::string& /*scans*/) {
    throw ConfigError("this store cannot record a trace (only RocksDB can)", false);
  }
  virtual void end_trace() {}
};

using Config = std::map<std::string, std::string>;

// Destroy whatever is at `path`, then open a new store there under `config`.
// `statistics`: keep RocksDB's tickers (block cache, bloom filter, memtable counts), at a cost per operation.
std::unique_ptr<Engine> open_rocksdb(const std::string& path, const Config& config, bool sync, bool statistics);
std::unique_ptr<Engine> open_leveldb(const std::string& path, const Config& config, bool sync);
// Whether this binary's LevelDB is the patched one (native/leveldb/): db/dbformat.h's constants as options.
bool leveldb_tunable();

// Seek to `start` (empty: the first key) and count up to `limit` keys (0: all); the status is checked by the caller.
template <typename Iterator>
uint64_t count_keys(Iterator* it, const std::string& start, uint64_t limit) {
  uint64_t seen = 0;
  for (start.empty() ? it->SeekToFirst() : it->Seek(start); it->Valid() && (limit == 0 || seen < limit); it->Next())
    ++seen;
  return seen;
}

// Count up to `limit` keys backwards from the last key at or before `start`, once the caller has positioned `it`.
template <typename Iterator>
uint64_t count_keys_back(Iterator* it, uint64_t limit) {
  uint64_t seen = 0;
  for (; it->Valid() && (limit == 0 || seen < limit); it->Prev()) ++seen;
  return seen;
}

// Helpers shared by the adapters: parse a config value or throw ConfigError naming key and value.
uint64_t parse_uint(const std::string& key, const std::string& value);
bool parse_bool(const std::string& key, const std::string& value);

}  // namespace kvbench
