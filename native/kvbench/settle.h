// --settle: reopen a store a run left as a crash leaves it, time the reopen until it answers
// (recovery), flush it and wait until its compaction is done (the settle), within a limit.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <stdexcept>
#include <thread>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "workload.h"

namespace kvbench {

// Raised when the store to settle is not there (exit 2).
struct NoStoreError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The result JSON of a settle; "settled" false when compaction was still pending at the limit.
nlohmann::json settle_rocksdb(const std::string& path, const SettleSpec& spec);
nlohmann::json settle_leveldb(const std::string& path, const SettleSpec& spec);

// ------------------------------------------------------------------ shared by the two

using SettleClock = std::chrono::steady_clock;

inline double seconds_since(SettleClock::time_point start) {
  return std::chrono::duration<double>(SettleClock::now() - start).count();
}

// The keys the probe reads after the reopen: record indices drawn uniformly with the spec's seed.
std::vector<std::string> probe_keys(const SettleSpec& spec);

// Total size of the files in `dir` whose names end with one of `suffixes`.
uint64_t bytes_of_files(const std::string& dir, const std::vector<std::string>& suffixes);

// Throws NoStoreError unless `dir` holds a store (its CURRENT file).
void require_store(const std::string& dir);

// Table files in a store's folder that its current version does not list: a flush or a compaction is writing
// them (LevelDB says nothing else about work in progress; a seek compaction, started by reads, is seen only this
// way); obsolete tables are deleted as soon as a compaction installs its result. One whose size has not changed
// for `leftover_s` is not being written but left behind, and is not waited for.
class UnlistedTables {
 public:
  UnlistedTables(std::string dir, std::string suffix, double leftover_s)
      : dir_(std::move(dir)), suffix_(std::move(suffix)), leftover_s_(leftover_s) {}

  // Whether a table whose number `listed` lacks is new or grew within the last `leftover_s`.
  bool being_written(const std::set<uint64_t>& listed);

  // The unlisted tables that stopped changing `leftover_s` or more ago, at the last look.
  std::vector<std::string> left_behind() const;
  // Every unlisted table at the last look.
  std::vector<std::string> unlisted() const;

 private:
  struct Seen {
    uint64_t size;
    SettleClock::time_point since;  // when this size was first seen
  };
  std::string dir_, suffix_;
  double leftover_s_;
  std::map<std::string, Seen> seen_;
};

// The lines of an engine's info log that report an error (LevelDB: "Compaction error: ...", after which it
// stops compacting; not the "(ignoring error)" of a log tail a crash cut).
std::vector<std::string> error_lines(const std::string& log_path);

// What one settle measured and left; settle_result() turns it into the result JSON.
struct SettleReport {
  double open_s = 0, probe_s = 0, flush_s = 0, compaction_s = 0, close_s = 0;
  uint64_t found = 0, not_found = 0;
  bool settled = true, reshaped = false;
  double gave_up_after_s = 0;  // since the open, when compaction was still pending at the limit
  nlohmann::json original = nlohmann::json::object();  // the options a reshape changed (RocksDB)
  std::vector<uint64_t> files_by_level;
  std::vector<std::string> left_behind;  // table files in no level that stopped changing (LevelDB)
  std::vector<std::string> engine_errors;  // error lines of the engine's own LOG, after which it stopped compacting
  uint64_t sst_bytes = 0, wal_bytes_at_open = 0;
  std::string engine_version;
};
nlohmann::json settle_result(const SettleReport& r);

// Poll `pending` every 10 ms until it is false (true) or `limit_s` has passed since `start` (false).
template <typename Pending>
bool wait_until_settled(Pending&& pending, SettleClock::time_point start, double limit_s) {
  while (pending()) {
    if (seconds_since(start) >= limit_s) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace kvbench
