#include <leveldb/cache.h>
#include <leveldb/db.h>
#include <leveldb/filter_policy.h>
#include <leveldb/write_batch.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>

#include "engine.h"
#include "settle.h"

// Built twice (native/CMakeLists.txt): against the system's LevelDB 1.23 (kvbench) and against LevelDB
// patched by native/leveldb/tunable-constants.patch (kvbench-leveldb-tunable), whose options.h defines
// LEVELDB_TUNABLE_CONSTANTS and whose Options hold db/dbformat.h's constants as fields.

namespace kvbench {

#ifdef LEVELDB_TUNABLE_CONSTANTS
bool leveldb_tunable() { return true; }
#else
bool leveldb_tunable() { return false; }
#endif

namespace {

constexpr int kLevels = 7;  // LevelDB 1.23's config::kNumLevels (a constant in both builds)
constexpr uint64_t kSampleEvery = 1024;  // writes between two looks at the level-0 file count
// A write this slow waited for LevelDB: its level-0 slowdown sleeps 1 ms per write, and a full memtable whose
// predecessor is still being written, or level 0 at its stop trigger, blocks the write until compaction frees it.
constexpr double kSlowWriteS = 0.001;

// The options the patched build adds (LevelDB's constant each replaces, in brackets).
const char* const kTunableOptions[] = {
    "level0_file_num_compaction_trigger",  // kL0_CompactionTrigger 4
    "level0_slowdown_writes_trigger",      // kL0_SlowdownWritesTrigger 8
    "level0_stop_writes_trigger",          // kL0_StopWritesTrigger 12
    "max_mem_compact_level",               // kMaxMemCompactLevel 2
    "read_bytes_period",                   // kReadBytesPeriod 1048576
};

// A count of level-0 files or the like, from one of LevelDB's numeric properties.
uint64_t property_number(leveldb::DB* db, const std::string& name) {
  std::string text;
  if (!db->GetProperty(name, &text)) throw IoError("cannot read the LevelDB property " + name);
  return std::stoull(text);
}

struct CompactionBytes {
  uint64_t read = 0, written = 0;
};

// The bytes LevelDB's compactions read and wrote, summed over the levels of its "leveldb.stats" text (one line
// per level: level, files, size, time, read and written in whole MiB). LevelDB counts a memtable written to a
// table as a compaction too: `written` holds the flushes.
CompactionBytes compaction_bytes(leveldb::DB* db) {
  std::string text;
  if (!db->GetProperty("leveldb.stats", &text)) throw IoError("cannot read the LevelDB property leveldb.stats");
  CompactionBytes bytes;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    int level = 0;
    double files = 0, size_mib = 0, seconds = 0, read_mib = 0, written_mib = 0;
    if (!(fields >> level >> files >> size_mib >> seconds >> read_mib >> written_mib)) continue;  // a heading
    bytes.read += static_cast<uint64_t>(read_mib * 1048576.0);
    bytes.written += static_cast<uint64_t>(written_mib * 1048576.0);
  }
  return bytes;
}

class LevelDbEngine : public Engine {
 public:
  // `opened`: the options the store was opened with (opened_options), which LevelDB itself keeps no record of.
  LevelDbEngine(leveldb::DB* db, leveldb::Cache* cache, const leveldb::FilterPolicy* filter, bool sync,
                nlohmann::json opened)
      : db_(db), cache_(cache), filter_(filter), opened_(std::move(opened)) { write_.sync = sync; }
  ~LevelDbEngine() override { delete db_; delete cache_; delete filter_; }

  void put(std::string_view key, std::string_view value) override {
    const auto begin = std::chrono::steady_clock::now();
    check(db_->Put(write_, leveldb::Slice(key.data(), key.size()), leveldb::Slice(value.data(), value.size())));
    wrote(begin, key.size() + value.size());
  }
  Lookup get(std::string_view key) override {
    thread_local std::string value;  // LevelDB copies every value out: one buffer per thread, reused
    leveldb::Status s = db_->Get(leveldb::ReadOptions(), leveldb::Slice(key.data(), key.size()), &value);
    if (s.IsNotFound()) return Lookup::kNotFound;
    check(s);
    return Lookup::kFound;
  }
  void remove(std::string_view key) override {
    const auto begin = std::chrono::steady_clock::now();
    check(db_->Delete(write_, leveldb::Slice(key.data(), key.size())));
    wrote(begin, key.size());
  }
  uint64_t scan(const std::string& start, uint64_t limit) override {
    std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
    uint64_t seen = count_keys(it.get(), start, limit);
    check(it->status());
    return seen;
  }
  uint64_t scan_reverse(const std::string& start, uint64_t limit) override {  // LevelDB has no SeekForPrev
    std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
    it->Seek(start);
    if (!it->Valid()) it->SeekToLast();
    else if (it->key().compare(leveldb::Slice(start)) > 0) it->Prev();
    uint64_t seen = count_keys_back(it.get(), limit);
    check(it->status());
    return seen;
  }
  std::string version() const override {
    return std::to_string(leveldb::kMajorVersion) + "." + std::to_string(leveldb::kMinorVersion) +
           (leveldb_tunable() ? "+tunable-constants" : "");
  }
  // LevelDB's own counts (knobtune/systems/leveldb/counters.toml says what each is): files per level now
  // ("leveldb.num-files-at-levelN"), the most level-0 files seen during the run (looked at every kSampleEvery
  // writes and now), the compaction bytes of "leveldb.stats"; and kvbench's: the bytes of keys and values
  // written, the writes slower than kSlowWriteS and their time.
  nlohmann::json stats() const override {
    std::vector<uint64_t> files;
    for (int level = 0; level < kLevels; ++level)
      files.push_back(property_number(db_, "leveldb.num-files-at-level" + std::to_string(level)));
    const CompactionBytes compaction = compaction_bytes(db_);
    return {{"files_by_level", files}, {"l0_files_end", files[0]},
            {"max_level0_files", std::max(max_level0_files_.load(), files[0])},
            {"compact_read_bytes", compaction.read}, {"compact_write_bytes", compaction.written},
            {"user_bytes_written", user_bytes_.load()}, {"slow_writes", slow_writes_.load()},
            {"stall_s", static_cast<double>(slow_write_ns_.load()) / 1e9}};
  }
  nlohmann::json options() const override { return opened_; }

 private:
  static void check(const leveldb::Status& s) { if (!s.ok()) throw IoError(s.ToString()); }
  // Counts a write that began at `begin`; several threads write at once, so every counter is an atomic.
  void wrote(std::chrono::steady_clock::time_point begin, uint64_t bytes) {
    const auto took = std::chrono::steady_clock::now() - begin;
    if (std::chrono::duration<double>(took).count() >= kSlowWriteS) {
      slow_writes_.fetch_add(1, std::memory_order_relaxed);
      slow_write_ns_.fetch_add(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(took).count()),
                               std::memory_order_relaxed);
    }
    user_bytes_.fetch_add(bytes, std::memory_order_relaxed);
    if (writes_.fetch_add(1, std::memory_order_relaxed) % kSampleEvery == kSampleEvery - 1)
      raise_to(max_level0_files_, property_number(db_, "leveldb.num-files-at-level0"));
  }
  static void raise_to(std::atomic<uint64_t>& most, uint64_t seen) {
    uint64_t now = most.load(std::memory_order_relaxed);
    while (seen > now && !most.compare_exchange_weak(now, seen, std::memory_order_relaxed)) {}
  }
  leveldb::DB* db_;
  leveldb::Cache* cache_;
  const leveldb::FilterPolicy* filter_;
  const nlohmann::json opened_;
  leveldb::WriteOptions write_;  // read by every writing thread, set once in the constructor
  std::atomic<uint64_t> writes_{0};
  std::atomic<uint64_t> max_level0_files_{0};
  std::atomic<uint64_t> user_bytes_{0};
  std::atomic<uint64_t> slow_writes_{0};
  std::atomic<uint64_t> slow_write_ns_{0};
};

// One of the patched build's options into `options`; false when `key` is none of them. The system's
// LevelDB has them as compile-time constants: the plain build refuses them as the store's (exit 3).
bool set_tunable(leveldb::Options& options, const std::string& key, const std::string& value) {
  if (std::find(std::begin(kTunableOptions), std::end(kTunableOptions), key) == std::end(kTunableOptions))
    return false;
#ifdef LEVELDB_TUNABLE_CONSTANTS
  const uint64_t number = parse_uint(key, value);
  if (number > static_cast<uint64_t>(INT_MAX))
    throw ConfigError(key + ": " + value + " is over the largest value LevelDB takes (" + std::to_string(INT_MAX) + ")",
                      true);
  const int n = static_cast<int>(number);
  if (key == "level0_file_num_compaction_trigger") options.level0_file_num_compaction_trigger = n;
  else if (key == "level0_slowdown_writes_trigger") options.level0_slowdown_writes_trigger = n;
  else if (key == "level0_stop_writes_trigger") options.level0_stop_writes_trigger = n;
  else if (key == "max_mem_compact_level") options.max_mem_compact_level = n;
  else options.read_bytes_period = n;
  return true;
#else
  (void)options;
  (void)value;
  throw ConfigError("LevelDB option '" + key + "' is a compile-time constant of the system's LevelDB 1.23, which "
                    "this kvbench links. Fix: run kvbench-leveldb-tunable (knobtune: --driver kvbench-tunable)", true);
#endif
}

// The level-0 file count at which LevelDB starts a compaction under `options`.
uint64_t l0_compaction_trigger(const leveldb::Options& options) {
#ifdef LEVELDB_TUNABLE_CONSTANTS
  return static_cast<uint64_t>(options.level0_file_num_compaction_trigger);
#else
  (void)options;
  return 4;  // config::kL0_CompactionTrigger
#endif
}

// What kvbench built for the store beside its Options, which LevelDB cannot report: the block cache's capacity
// (LevelDB's own cache of 8 MiB when none is given: DBImpl's SanitizeOptions) and the bloom filter's bits (0: none).
struct Built {
  uint64_t cache_bytes = 8 << 20;
  uint64_t bloom_bits = 0;
};

// LevelDB options from a config map; the cache and filter it creates are handed to the caller, what they are in
// `built`.
leveldb::Options leveldb_options(const Config& config, leveldb::Cache** cache, const leveldb::FilterPolicy** filter,
                                 Built* built) {
  leveldb::Options options;
  for (const auto& [key, value] : config) {
    if (key == "write_buffer_size") options.write_buffer_size = parse_uint(key, value);
    else if (key == "max_open_files") options.max_open_files = static_cast<int>(parse_uint(key, value));
    else if (key == "block_size") options.block_size = parse_uint(key, value);
    else if (key == "block_restart_interval") options.block_restart_interval = static_cast<int>(parse_uint(key, value));
    else if (key == "max_file_size") options.max_file_size = parse_uint(key, value);
    else if (key == "reuse_logs") options.reuse_logs = parse_bool(key, value);
    else if (key == "paranoid_checks") options.paranoid_checks = parse_bool(key, value);
    else if (key == "compression") {
      if (value == "snappy") options.compression = leveldb::kSnappyCompression;
      else if (value == "none") options.compression = leveldb::kNoCompression;
      else throw ConfigError("compression: '" + value + "' is not snappy or none", false);
    } else if (key == "block_cache_size") {
      delete *cache;
      built->cache_bytes = parse_uint(key, value);
      *cache = leveldb::NewLRUCache(built->cache_bytes);
      options.block_cache = *cache;
    } else if (key == "bloom_bits") {
      uint64_t bits = parse_uint(key, value);
      built->bloom_bits = bits;
      delete *filter;
      *filter = bits > 0 ? leveldb::NewBloomFilterPolicy(static_cast<int>(bits)) : nullptr;
      options.filter_policy = *filter;
    } else if (!set_tunable(options, key, value)) {
      throw ConfigError("unknown LevelDB option '" + key + "'", false);
    }
  }
  return options;
}

// The options a store is opened with, named as kvbench's config names them: read from `options` (the struct
// handed to DB::Open) and `built`. LevelDB keeps no record of them (no OPTIONS file, nothing in its LOG), so this
// is how a run says what it ran.
nlohmann::json opened_options(const leveldb::Options& options, const Built& built) {
  nlohmann::json opened = {
      {"write_buffer_size", options.write_buffer_size}, {"max_file_size", options.max_file_size},
      {"block_size", options.block_size}, {"block_restart_interval", options.block_restart_interval},
      {"max_open_files", options.max_open_files},
      {"compression", options.compression == leveldb::kSnappyCompression ? "snappy" : "none"},
      {"reuse_logs", options.reuse_logs}, {"paranoid_checks", options.paranoid_checks},
      {"block_cache_size", built.cache_bytes}, {"bloom_bits", built.bloom_bits}};
#ifdef LEVELDB_TUNABLE_CONSTANTS
  opened["level0_file_num_compaction_trigger"] = options.level0_file_num_compaction_trigger;
  opened["level0_slowdown_writes_trigger"] = options.level0_slowdown_writes_trigger;
  opened["level0_stop_writes_trigger"] = options.level0_stop_writes_trigger;
  opened["max_mem_compact_level"] = options.max_mem_compact_level;
  opened["read_bytes_period"] = options.read_bytes_period;
#endif
  return opened;
}

}  // namespace

std::unique_ptr<Engine> open_leveldb(const std::string& path, const Config& config, bool sync) {
  leveldb::Cache* cache = nullptr;
  const leveldb::FilterPolicy* filter = nullptr;
  leveldb::Options options;
  Built built;
  try {
    options = leveldb_options(config, &cache, &filter, &built);
  } catch (...) {
    delete cache; delete filter;
    throw;
  }
  options.create_if_missing = true;
  options.error_if_exists = true;
  leveldb::DestroyDB(path, leveldb::Options());
  leveldb::DB* db = nullptr;
  leveldb::Status s = leveldb::DB::Open(options, path, &db);
  if (!s.ok()) {
    delete cache; delete filter;
    throw ConfigError("database refused config: " + s.ToString(), true);
  }
  return std::make_unique<LevelDbEngine>(db, cache, filter, sync, opened_options(options, built));
}

// ------------------------------------------------------------------ settle

namespace {

constexpr double kLevel1Bytes = 10.0 * 1048576.0;  // MaxBytesForLevel(1); x10 per level below
// A table in no level that has not grown for this long is left behind, not being written: seen once in about
// 500 settles of a study, a full 2 MiB table in no level while nothing compacted, and the settle waited out its
// whole limit (323 s) for it. A table being written grows every 64 KiB (LevelDB's write buffer).
constexpr double kLeftoverS = 2.0;

struct Shape {
  std::vector<uint64_t> files = std::vector<uint64_t>(kLevels, 0);
  std::vector<uint64_t> bytes = std::vector<uint64_t>(kLevels, 0);
  std::string tables;  // the "leveldb.sstables" text: changes whenever a compaction installs its result
  std::set<uint64_t> numbers;  // the table files the current version lists
};

// The files and bytes per level, read from the "leveldb.sstables" property ("--- level N ---", then
// one line per file: " number:size[smallest .. largest]").
Shape shape_of(leveldb::DB* db) {
  Shape shape;
  if (!db->GetProperty("leveldb.sstables", &shape.tables)) throw IoError("cannot read leveldb.sstables");
  int level = -1;
  std::istringstream lines(shape.tables);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("--- level ", 0) == 0) { level = std::stoi(line.substr(10)); continue; }
    auto colon = line.find(':'), bracket = line.find('[');
    if (level < 0 || level >= kLevels || colon == std::string::npos || bracket == std::string::npos) continue;
    ++shape.files[level];
    shape.bytes[level] += std::stoull(line.substr(colon + 1, bracket - colon - 1));
    shape.numbers.insert(std::stoull(line.substr(0, colon)));
  }
  return shape;
}

// LevelDB 1.23's own rule (VersionSet::Finalize): a level whose score reaches 1 is compacted.
bool needs_compaction(const Shape& shape, uint64_t l0_trigger) {
  if (shape.files[0] >= l0_trigger) return true;
  double limit = kLevel1Bytes;
  for (int level = 1; level < kLevels - 1; ++level, limit *= 10)
    if (static_cast<double>(shape.bytes[level]) >= limit) return true;
  return false;
}

}  // namespace

nlohmann::json settle_leveldb(const std::string& path, const SettleSpec& spec) {
  require_store(path);
  const uint64_t wal_bytes = bytes_of_files(path, {".log"});
  leveldb::Cache* cache = nullptr;
  const leveldb::FilterPolicy* filter = nullptr;
  Built built;
  leveldb::Options options = leveldb_options(spec.config, &cache, &filter, &built);
  options.create_if_missing = false;
  options.error_if_exists = false;
  const uint64_t l0_trigger = l0_compaction_trigger(options);
  SettleReport t;
  t.wal_bytes_at_open = wal_bytes;
  auto start = SettleClock::now();
  leveldb::DB* db = nullptr;
  leveldb::Status s = leveldb::DB::Open(options, path, &db);
  if (!s.ok()) {
    delete cache; delete filter;
    throw ConfigError("the store did not reopen: " + s.ToString(), true);
  }
  // the engine owns db, cache and filter now
  auto engine = std::make_unique<LevelDbEngine>(db, cache, filter, false, opened_options(options, built));
  t.engine_version = engine->version();
  t.open_s = seconds_since(start);
  auto step = SettleClock::now();
  for (const auto& key : probe_keys(spec))
    (engine->get(key) == Lookup::kFound ? t.found : t.not_found)++;
  t.probe_s = seconds_since(step);
  step = SettleClock::now();  // no flush: the reopen wrote the recovered log to level-0 tables (unless reuse_logs)
  Shape last;
  UnlistedTables unlisted(path, ".ldb", kLeftoverS);
  int quiet_polls = 0;
  const std::string log = path + "/LOG";
  uintmax_t log_size = 0;
  auto pending = [&] {
    Shape now = shape_of(db);
    const bool writing = unlisted.being_written(now.numbers);  // every poll: a table's growth is timed throughout
    const bool quiet = !needs_compaction(now, l0_trigger) && now.tables == last.tables && !writing;
    quiet_polls = quiet ? quiet_polls + 1 : 0;
    last = now;
    std::error_code ignored;
    if (const uintmax_t size = std::filesystem::file_size(log, ignored); !ignored && size != log_size) {
      log_size = size;
      t.engine_errors = error_lines(log);  // after "Compaction error: ..." LevelDB never compacts again
    }
    return quiet_polls < 2 && t.engine_errors.empty();
  };
  const double left_s = spec.compaction_limit_s - seconds_since(start);
  t.settled = wait_until_settled(pending, step, std::max(left_s, 0.0)) && t.engine_errors.empty();
  t.compaction_s = seconds_since(step);
  t.gave_up_after_s = seconds_since(start);
  t.files_by_level = last.files;
  // what the error abandoned is in no level at once; otherwise only what stopped changing is left behind
  t.left_behind = t.engine_errors.empty() ? unlisted.left_behind() : unlisted.unlisted();
  step = SettleClock::now();
  engine.reset();  // closing waits for a compaction still running
  t.close_s = seconds_since(step);
  t.sst_bytes = bytes_of_files(path, {".ldb", ".sst"});
  nlohmann::json result = settle_result(t);
  result["options"] = opened_options(options, built);  // what the store was reopened with
  return result;
}

}  // namespace kvbench
