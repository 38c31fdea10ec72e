// A workload spec (JSON) and the loop that runs it against an Engine.
#pragma once

#include <cstdint>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine.h"

namespace kvbench {

struct SpecError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Mix {
  double read = 0, update = 0, insert = 0, scan = 0, rmw = 0, scan_reverse = 0;
};

struct PhaseSpec {
  std::string name, kind;           // kind: fill, read, delete, readseq, mix
  std::string order = "shuffled";   // fill/read/delete: sequential, shuffled, random
  uint64_t count = 0;               // 0: record_count
  Mix mix;
  std::string distribution = "uniform";  // mix: uniform, zipfian, latest
  double zipfian_constant = 0.99;
  uint64_t scan_length_min = 1, scan_length_max = 100;
};

struct Spec {
  uint64_t seed = 42, key_size = 16, value_size = 100, record_count = 0;
  unsigned threads = 1;  // client threads of every phase but readseq and flush (which run on one)
  bool write_sync = false;
  bool statistics = false;  // RocksDB: keep its tickers (a Statistics object: about 6% of a point read's instructions)
  std::vector<PhaseSpec> phases;
  Config config;
  // Capture the run as RocksDB traces it (knobtune capture --workload): from the phase named `trace_from` (empty:
  // the first) on, every operation goes to the trace file `trace`, after a checkpoint of the store into
  // `trace_checkpoint` (empty: none, the trace starts from an empty store); each traced seek's Next and Prev calls
  // go to `trace_scans` (empty: not recorded; native/scanlog/scan_log.h).
  std::string trace, trace_checkpoint, trace_from, trace_scans;
};

// Raises SpecError naming the field and the fix.
Spec parse_spec(const nlohmann::json& json);

// What --settle does with a store a run left behind (see settle.h).
struct SettleSpec {
  uint64_t key_size = 16, record_count = 0, probe_keys = 1000, seed = 42;
  std::string key_format = "kvbench";  // kvbench or db_bench: how record i's key is spelled
  double compaction_limit_s = 60.0;
  Config config;
};

// Raises SpecError naming the field and the fix.
SettleSpec parse_settle_spec(const nlohmann::json& json);

// The largest `threads` a spec may ask for.
constexpr unsigned kMaxThreads = 1024;

// The part [begin, end) of `total` items that thread `t` of `threads` takes: contiguous, and the remainder of
// total / threads goes one each to the first threads, so the parts cover every item exactly once.
struct Slice {
  uint64_t begin, end;
};
Slice slice_of(uint64_t total, unsigned t, unsigned threads);

// Runs every phase (on spec.threads threads); progress lines (JSON) go to `progress` every `interval_s`.
nlohmann::json run(Engine& engine, const Spec& spec, double interval_s, std::ostream& progress);

}  // namespace kvbench
