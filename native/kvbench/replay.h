// RocksDB traces (DB::StartTrace), as captures of an application's real work: replay one onto a store under a
// config, read one without running it, and take the digest of a store's whole contents (the replay's data check).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine.h"

namespace kvbench {

// A trace knobtune cannot replay (not a trace, cut short, damaged): the caller's input, exit 2.
struct TraceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct ReplaySpec {
  std::string trace;      // the trace file
  uint64_t limit = 0;     // replay the first `limit` query records (0: all): a rung is the first fraction
  // Or replay these ranges of query records only, [begin, end) by their number in the trace from 0, ascending and
  // apart (a rung made of slices spread over the capture); the gaps between them are not waited for when paced.
  std::vector<std::pair<uint64_t, uint64_t>> windows;
  unsigned threads = 1;   // >1: records go to threads by their first key, so each key's operations keep their order
  bool paced = false;     // at the trace's own pace (the captured gaps between records); else as fast as it can
  bool statistics = false;
  // Rewrite every table of the store under the config (one full compaction) before the replay, unmeasured: the
  // checkpoint's tables then have the config's block size, compression and filters, as a store's compactions
  // eventually give them; false: the checkpoint's tables stay as they were written.
  bool rewrite = false;
  std::string scans;      // the scan lengths recorded beside the trace (scan_lengths.h); empty: none, seeks alone
  // With scans: write one line per replayed seek here, in the trace's order (no key: "<seek number> <cf> <kind>
  // <recorded next> <recorded prev> <matched 0|1> <replayed next> <replayed prev>"); empty: none.
  std::string scan_report;
  Config config;
};

// Raises SpecError naming the field and the fix.
ReplaySpec parse_replay_spec(const nlohmann::json& json);

// Open the store in `path` (the capture's checkpoint copied there, or nothing: a new store) under the spec's
// config, and replay the trace's first records (or its windows) onto it through RocksDB's Replayer, timing each. The store is left
// open for the caller's crash (the settle then reopens it). With the spec's `scans`, each traced seek that matches a
// recorded scan is followed on its iterator by the scan's Next and Prev calls, stopping early where the iterator
// becomes invalid. Throws ConfigError, TraceError, ScanFileError, IoError.
nlohmann::json replay_rocksdb(const std::string& path, const ReplaySpec& spec, double interval_s,
                              std::ostream& progress);

// What a trace holds, without running it (records by kind, the keys' and values' sizes, its span): `scratch` is an
// empty folder for the store RocksDB's reader needs; `scans` (may be empty): the scan lengths recorded beside it,
// matched to its seeks as a replay matches them (counts only). Throws TraceError, ScanFileError.
nlohmann::json inspect_trace(const std::string& trace, const std::string& scratch, const std::string& scans);

// The digest of every key and value of every column family of the store in `path`, in order (FNV-1a, 64 bits,
// over length-prefixed names, keys and values), opened read-only. Throws NoStoreError, IoError.
nlohmann::json digest_rocksdb(const std::string& path);

}  // namespace kvbench
