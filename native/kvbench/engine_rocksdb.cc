#include <rocksdb/cache.h>
#include <rocksdb/convenience.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/memtablerep.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/statistics.h>
#include <rocksdb/table.h>
#include <rocksdb/trace_reader_writer.h>
#include <rocksdb/utilities/checkpoint.h>
#include <rocksdb/utilities/options_util.h>
#include <rocksdb/version.h>

#include <algorithm>

#include "engine.h"
#include "engine_rocksdb.h"
#include "kvbench_build.h"
#include "scan_log.h"
#include "settle.h"

namespace kvbench {
namespace {

// A number in one of RocksDB's map properties (0 when the map has no such key).
double map_number(const std::map<std::string, std::string>& map, const std::string& key) {
  auto it = map.find(key);
  return it == map.end() ? 0.0 : std::stod(it->second);
}

uint64_t map_count(const std::map<std::string, std::string>& map, const std::string& key) {
  return static_cast<uint64_t>(map_number(map, key));
}

}  // namespace


// The version and the build kvbench was linked with (native/CMakeLists.txt: the release build, or the system's).
std::string engine_version() {
  return std::to_string(ROCKSDB_MAJOR) + "." + std::to_string(ROCKSDB_MINOR) + "." + std::to_string(ROCKSDB_PATCH) +
         " (" KVBENCH_ROCKSDB_BUILD ")";
}

// RocksDB's own counters over the run (knobtune/systems/rocksdb/counters.toml says what each is). Always: the
// DB stats' stall time and user bytes, the "rocksdb.cfstats" map's stall counts and bytes written and read per
// level, level-0 files and pending compaction bytes now (RocksDB keeps these anyway). With a Statistics object
// (the spec's "statistics"): its tickers, which win where they say the same. Ratios are left to the reader.
nlohmann::json rocksdb_counters(rocksdb::DB* db, const std::shared_ptr<rocksdb::Statistics>& stats) {
  std::map<std::string, std::string> cf, dbs;
  db->GetMapProperty(rocksdb::DB::Properties::kCFStats, &cf);
  db->GetMapProperty(rocksdb::DB::Properties::kDBStats, &dbs);
  auto stalls = [&](const char* a, const char* b) {
    return map_count(cf, std::string("io_stalls.") + a) + map_count(cf, std::string("io_stalls.") + b);
  };
  auto gib = [&](const char* key) { return static_cast<uint64_t>(map_number(cf, key) * 1073741824.0 + 0.5); };
  uint64_t pending = 0;
  db->GetIntProperty(rocksdb::DB::Properties::kEstimatePendingCompactionBytes, &pending);
  std::string level0;
  db->GetProperty(rocksdb::DB::Properties::kNumFilesAtLevelPrefix + "0", &level0);
  const uint64_t level0_written = gib("compaction.L0.WriteGB");  // flushes (and the rare intra-L0 compaction)
  nlohmann::json counters = {
      {"stall_s", map_number(dbs, "db.user_write_stall_micros") / 1e6},
      {"stalls_level0", stalls("level0_slowdown", "level0_numfiles")},  // the *_with_compaction are subsets
      {"stalls_pending_compaction", stalls("stop_for_pending_compaction_bytes",
                                           "slowdown_for_pending_compaction_bytes")},
      {"stalls_memtable", stalls("memtable_compaction", "memtable_slowdown")},
      {"l0_files_end", level0.empty() ? 0 : std::stoull(level0)}, {"pending_compaction_bytes_end", pending},
      {"user_bytes_written", map_count(dbs, "db.user_bytes_written")},
      {"flush_write_bytes", level0_written},
      {"compact_write_bytes", gib("compaction.Sum.WriteGB") - std::min(level0_written, gib("compaction.Sum.WriteGB"))},
      {"compact_read_bytes", gib("compaction.Sum.ReadGB")}};
  if (!stats) return counters;
  auto t = [&](rocksdb::Tickers ticker) { return stats->getTickerCount(ticker); };
  counters.update({{"stall_s", static_cast<double>(t(rocksdb::STALL_MICROS)) / 1e6},
                   {"block_cache_hit", t(rocksdb::BLOCK_CACHE_HIT)}, {"block_cache_miss", t(rocksdb::BLOCK_CACHE_MISS)},
                   {"bloom_useful", t(rocksdb::BLOOM_FILTER_USEFUL)},
                   {"bloom_full_positive", t(rocksdb::BLOOM_FILTER_FULL_POSITIVE)},
                   {"memtable_hit", t(rocksdb::MEMTABLE_HIT)}, {"memtable_miss", t(rocksdb::MEMTABLE_MISS)},
                   {"user_bytes_written", t(rocksdb::BYTES_WRITTEN)},
                   {"flush_write_bytes", t(rocksdb::FLUSH_WRITE_BYTES)},
                   {"compact_write_bytes", t(rocksdb::COMPACT_WRITE_BYTES)},
                   {"compact_read_bytes", t(rocksdb::COMPACT_READ_BYTES)}});
  return counters;
}

namespace {

class RocksDbEngine : public Engine {
 public:
  RocksDbEngine(rocksdb::DB* db, std::shared_ptr<rocksdb::Statistics> stats, bool sync)
      : db_(db), stats_(std::move(stats)) { write_.sync = sync; }
  ~RocksDbEngine() override { delete db_; }

  void put(std::string_view key, std::string_view value) override {
    check(db_->Put(write_, rocksdb::Slice(key.data(), key.size()), rocksdb::Slice(value.data(), value.size())));
  }
  Lookup get(std::string_view key) override {
    rocksdb::PinnableSlice pinned;  // like db_bench: no copy of the value out of the block cache
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), db_->DefaultColumnFamily(),
                                 rocksdb::Slice(key.data(), key.size()), &pinned);
    if (s.IsNotFound()) return Lookup::kNotFound;
    check(s);
    return Lookup::kFound;
  }
  void remove(std::string_view key) override { check(db_->Delete(write_, rocksdb::Slice(key.data(), key.size()))); }
  void flush() override {
    rocksdb::FlushOptions options;
    options.wait = true;
    check(db_->Flush(options));
  }
  uint64_t scan(const std::string& start, uint64_t limit) override {
    std::unique_ptr<rocksdb::Iterator> it = iterator();
    uint64_t seen = count_keys(it.get(), start, limit);
    check(it->status());
    return seen;
  }
  uint64_t scan_reverse(const std::string& start, uint64_t limit) override {
    std::unique_ptr<rocksdb::Iterator> it = iterator();
    it->SeekForPrev(start);
    uint64_t seen = count_keys_back(it.get(), limit);
    check(it->status());
    return seen;
  }
  std::string version() const override { return engine_version(); }
  nlohmann::json stats() const override { return rocksdb_counters(db_, stats_); }
  void start_trace(const std::string& trace, const std::string& checkpoint, const std::string& scans) override {
    if (!checkpoint.empty()) {
      rocksdb::Checkpoint* raw = nullptr;
      check(rocksdb::Checkpoint::Create(db_, &raw));
      std::unique_ptr<rocksdb::Checkpoint> taker(raw);
      check(taker->CreateCheckpoint(checkpoint));
    }
    std::unique_ptr<rocksdb::TraceWriter> writer;
    check(rocksdb::NewFileTraceWriter(db_->GetEnv(), rocksdb::EnvOptions(), trace, &writer));
    if (!scans.empty()) check(scans_.Start(scans));  // as an application would: the scan log, then the trace
    check(db_->StartTrace(rocksdb::TraceOptions(), std::move(writer)));
  }
  void end_trace() override {
    check(db_->EndTrace());
    check(scans_.End());
  }

 private:
  static void check(const rocksdb::Status& s) { if (!s.ok()) throw IoError(s.ToString()); }
  // An iterator over the whole store, its scan lengths logged while a trace records them.
  std::unique_ptr<rocksdb::Iterator> iterator() {
    rocksdb::ReadOptions read;
    read.total_order_seek = true;  // a prefix extractor (hash memtables) must not shorten scans
    rocksdb::Iterator* it = db_->NewIterator(read);
    if (scans_.Epoch() == 0) return std::unique_ptr<rocksdb::Iterator>(it);
    return std::make_unique<scanlog::ScanLoggedIterator>(it, db_->DefaultColumnFamily()->GetID(), &scans_);
  }
  rocksdb::DB* db_;
  std::shared_ptr<rocksdb::Statistics> stats_;
  rocksdb::WriteOptions write_;  // read by every writing thread, set once in the constructor
  scanlog::ScanLog scans_;  // started and ended with a trace, between phases (no scan runs then)
};

// Keys the driver handles itself (objects, not option strings); the rest go to RocksDB's string-map API.
struct DriverKeys {
  uint64_t block_cache_size = 8 << 20;
  double block_cache_high_pri_pool_ratio = rocksdb::LRUCacheOptions().high_pri_pool_ratio;  // RocksDB's own: 0.5
  uint64_t bloom_bits = 0;
  std::string memtablerep = "skip_list";
  uint64_t hash_bucket_count = 1000000;
  uint64_t prefix_size = 8;
  int64_t skiplist_height = 4, skiplist_branching_factor = 4;
};

// A fraction from 0 to 1 (a pool's share of the cache).
double parse_ratio(const std::string& key, const std::string& value) {
  size_t used = 0;
  double ratio = -1;
  try { ratio = std::stod(value, &used); } catch (const std::exception&) { used = 0; }
  if (used != value.size() || !(ratio >= 0 && ratio <= 1))
    throw ConfigError(key + ": '" + value + "' is not a fraction from 0 to 1", true);
  return ratio;
}

// The block cache as db_bench builds it: an LRU cache of ``capacity`` bytes whose high-priority pool (index and
// filter blocks, and the midpoint of data blocks' insertion) holds ``high_pri_pool_ratio`` of it.
std::shared_ptr<rocksdb::Cache> new_block_cache(uint64_t capacity, double high_pri_pool_ratio) {
  rocksdb::LRUCacheOptions options;
  options.capacity = capacity;
  options.high_pri_pool_ratio = high_pri_pool_ratio;
  return rocksdb::NewLRUCache(options);
}

// RocksDB's string-map API says "Could not find option" for a name no option struct has.
bool unknown_option(const rocksdb::Status& s) { return s.ToString().find("Could not find option") != std::string::npos; }

bool take_driver_key(const std::string& key, const std::string& value, DriverKeys* d) {
  if (key == "block_cache_size") d->block_cache_size = parse_uint(key, value);
  else if (key == "block_cache_high_pri_pool_ratio") d->block_cache_high_pri_pool_ratio = parse_ratio(key, value);
  else if (key == "bloom_bits") d->bloom_bits = parse_uint(key, value);
  else if (key == "memtablerep") d->memtablerep = value;
  else if (key == "hash_bucket_count") d->hash_bucket_count = parse_uint(key, value);
  else if (key == "prefix_size") d->prefix_size = parse_uint(key, value);
  else if (key == "skiplist_height") d->skiplist_height = static_cast<int64_t>(parse_uint(key, value));
  else if (key == "skiplist_branching_factor") d->skiplist_branching_factor = static_cast<int64_t>(parse_uint(key, value));
  else return false;
  return true;
}

void apply_memtable(const DriverKeys& d, rocksdb::Options* options) {
  if (d.memtablerep == "skip_list") return;
  if (d.memtablerep == "vector") {
    options->memtable_factory.reset(new rocksdb::VectorRepFactory());
    return;
  }
  if (d.prefix_size == 0) throw ConfigError("prefix_size must be > 0 for memtablerep " + d.memtablerep, true);
  options->prefix_extractor.reset(rocksdb::NewFixedPrefixTransform(d.prefix_size));
  if (d.memtablerep == "hash_skiplist" || d.memtablerep == "prefix_hash")
    options->memtable_factory.reset(rocksdb::NewHashSkipListRepFactory(
        d.hash_bucket_count, static_cast<int32_t>(d.skiplist_height), static_cast<int32_t>(d.skiplist_branching_factor)));
  else if (d.memtablerep == "hash_linkedlist")
    options->memtable_factory.reset(rocksdb::NewHashLinkListRepFactory(d.hash_bucket_count));
  else
    throw ConfigError("memtablerep: '" + d.memtablerep + "' is not skip_list, vector, hash_skiplist or hash_linkedlist",
                      false);
}

}  // namespace

rocksdb::Options rocksdb_options(const Config& config, std::shared_ptr<rocksdb::Statistics>* tickers) {
  rocksdb::ConfigOptions parse;
  parse.ignore_unknown_options = false;
  parse.input_strings_escaped = false;
  DriverKeys driver;
  std::unordered_map<std::string, std::string> db_map, cf_map, table_map;
  rocksdb::DBOptions db_probe;
  rocksdb::ColumnFamilyOptions cf_probe;
  rocksdb::BlockBasedTableOptions table_probe;
  for (const auto& [key, value] : config) {
    if (take_driver_key(key, value, &driver)) continue;
    std::unordered_map<std::string, std::string> one{{key, value}};
    rocksdb::Status as_db = rocksdb::GetDBOptionsFromMap(parse, rocksdb::DBOptions(), one, &db_probe);
    rocksdb::Status as_cf = rocksdb::GetColumnFamilyOptionsFromMap(parse, rocksdb::ColumnFamilyOptions(), one, &cf_probe);
    rocksdb::Status as_table =
        rocksdb::GetBlockBasedTableOptionsFromMap(parse, rocksdb::BlockBasedTableOptions(), one, &table_probe);
    if (as_db.ok()) db_map[key] = value;
    else if (as_cf.ok()) cf_map[key] = value;
    else if (as_table.ok()) table_map[key] = value;
    else if (unknown_option(as_db) && unknown_option(as_cf) && unknown_option(as_table))
      throw ConfigError("RocksDB has no option '" + key + "'", false);  // our spelling: a bad input (exit 2)
    else
      throw ConfigError("RocksDB refused " + key + "=" + value + ": " + (unknown_option(as_db) ? (unknown_option(as_cf)
                        ? as_table : as_cf) : as_db).ToString(), true);  // the value: the config's fault (exit 3)
  }
  rocksdb::DBOptions db_options;
  rocksdb::ColumnFamilyOptions cf_options;
  rocksdb::BlockBasedTableOptions table;
  rocksdb::Status s = rocksdb::GetDBOptionsFromMap(parse, rocksdb::DBOptions(), db_map, &db_options);
  if (s.ok()) s = rocksdb::GetColumnFamilyOptionsFromMap(parse, rocksdb::ColumnFamilyOptions(), cf_map, &cf_options);
  if (s.ok()) s = rocksdb::GetBlockBasedTableOptionsFromMap(parse, rocksdb::BlockBasedTableOptions(), table_map, &table);
  if (!s.ok()) throw ConfigError("invalid RocksDB options: " + s.ToString(), false);
  if (driver.block_cache_size == 0) table.no_block_cache = true;
  else table.block_cache = new_block_cache(driver.block_cache_size, driver.block_cache_high_pri_pool_ratio);
  if (driver.bloom_bits > 0) table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(static_cast<double>(driver.bloom_bits)));
  rocksdb::Options options(db_options, cf_options);
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  apply_memtable(driver, &options);
  if (tickers != nullptr) {
    *tickers = rocksdb::CreateDBStatistics();
    (*tickers)->set_stats_level(rocksdb::StatsLevel::kExceptHistogramOrTimers);  // no timers: half the default's cost
    options.statistics = *tickers;
  }
  return options;
}

std::unique_ptr<Engine> open_rocksdb(const std::string& path, const Config& config, bool sync, bool statistics) {
  std::shared_ptr<rocksdb::Statistics> tickers;
  rocksdb::Options options = rocksdb_options(config, statistics ? &tickers : nullptr);
  options.create_if_missing = true;
  options.error_if_exists = true;
  rocksdb::DestroyDB(path, rocksdb::Options());
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, path, &db);
  if (!s.ok()) throw ConfigError("database refused config: " + s.ToString(), true);
  return std::make_unique<RocksDbEngine>(db, tickers, sync);
}

// ------------------------------------------------------------------ settle

namespace {

// Whether any column family has a flush or compaction pending or running.
bool work_pending(rocksdb::DB* db, const std::vector<rocksdb::ColumnFamilyHandle*>& cfs) {
  static const std::vector<std::string> kProperties = {
      rocksdb::DB::Properties::kMemTableFlushPending, rocksdb::DB::Properties::kNumRunningFlushes,
      rocksdb::DB::Properties::kCompactionPending, rocksdb::DB::Properties::kNumRunningCompactions};
  for (auto* cf : cfs)
    for (const auto& property : kProperties) {
      uint64_t value = 0;
      if (!db->GetIntProperty(cf, property, &value)) throw IoError("cannot read property " + property);
      if (value > 0) return true;
    }
  return false;
}

// Auto-compaction off, or a level-0 trigger past RocksDB's default: bring the store to the default's shape.
nlohmann::json reshape(rocksdb::DB* db, const std::vector<rocksdb::ColumnFamilyHandle*>& cfs, bool* reshaped) {
  const int default_trigger = rocksdb::ColumnFamilyOptions().level0_file_num_compaction_trigger;
  nlohmann::json original = nlohmann::json::object();
  for (auto* cf : cfs) {
    rocksdb::Options options = db->GetOptions(cf);
    if (cf == cfs.front())
      original = {{"disable_auto_compactions", options.disable_auto_compactions},
                  {"level0_file_num_compaction_trigger", options.level0_file_num_compaction_trigger}};
    if (!options.disable_auto_compactions && options.level0_file_num_compaction_trigger <= default_trigger) continue;
    rocksdb::Status s = db->SetOptions(cf, {{"disable_auto_compactions", "false"},
                                            {"level0_file_num_compaction_trigger", std::to_string(default_trigger)}});
    if (!s.ok()) throw IoError("cannot re-enable compaction: " + s.ToString());
    *reshaped = true;
  }
  return original;
}

std::vector<uint64_t> files_by_level(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf) {
  std::vector<uint64_t> files;
  for (int level = 0; level < db->NumberLevels(cf); ++level) {
    uint64_t count = 0;
    std::string name = "rocksdb.num-files-at-level" + std::to_string(level);
    std::string text;
    if (db->GetProperty(cf, name, &text)) count = std::stoull(text);
    files.push_back(count);
  }
  return files;
}

}  // namespace

nlohmann::json settle_rocksdb(const std::string& path, const SettleSpec& spec) {
  require_store(path);
  const uint64_t wal_bytes = bytes_of_files(path, {".log"});
  auto cache_size = spec.config.count("block_cache_size") ? parse_uint("block_cache_size", spec.config.at("block_cache_size"))
                                                          : uint64_t{8} << 20;
  const double high_pri_pool_ratio = spec.config.count("block_cache_high_pri_pool_ratio")
      ? parse_ratio("block_cache_high_pri_pool_ratio", spec.config.at("block_cache_high_pri_pool_ratio"))
      : DriverKeys().block_cache_high_pri_pool_ratio;
  std::shared_ptr<rocksdb::Cache> cache = new_block_cache(std::max<uint64_t>(cache_size, 1 << 20), high_pri_pool_ratio);
  rocksdb::ConfigOptions load;
  load.ignore_unknown_options = true;
  rocksdb::DBOptions db_options;
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  rocksdb::Status s = rocksdb::LoadLatestOptions(load, path, &db_options, &descriptors, &cache);
  if (!s.ok()) throw NoStoreError("cannot read the store's OPTIONS file: " + s.ToString());
  db_options.create_if_missing = false;
  db_options.error_if_exists = false;

  SettleReport t;
  t.wal_bytes_at_open = wal_bytes;
  t.engine_version = engine_version();
  auto start = SettleClock::now();
  std::vector<rocksdb::ColumnFamilyHandle*> cfs;
  rocksdb::DB* db = nullptr;
  s = rocksdb::DB::Open(db_options, path, descriptors, &cfs, &db);
  if (!s.ok()) throw ConfigError("the store did not reopen: " + s.ToString(), true);
  t.open_s = seconds_since(start);
  auto step = SettleClock::now();
  for (const auto& key : probe_keys(spec)) {
    rocksdb::PinnableSlice value;
    rocksdb::Status got = db->Get(rocksdb::ReadOptions(), db->DefaultColumnFamily(), key, &value);
    if (got.IsNotFound()) ++t.not_found;
    else if (got.ok()) ++t.found;
    else throw IoError("probe read failed: " + got.ToString());
  }
  t.probe_s = seconds_since(step);
  step = SettleClock::now();
  rocksdb::FlushOptions flush;
  flush.wait = true;
  s = db->Flush(flush, cfs);
  if (!s.ok()) throw IoError("flush failed: " + s.ToString());
  t.flush_s = seconds_since(step);
  step = SettleClock::now();
  t.original = reshape(db, cfs, &t.reshaped);
  const double left_s = spec.compaction_limit_s - seconds_since(start);
  uint64_t background_errors = 0;
  auto pending = [&] {  // after an error of its own RocksDB stops flushing and compacting: nothing more to wait for
    db->GetIntProperty(rocksdb::DB::Properties::kBackgroundErrors, &background_errors);
    return background_errors == 0 && work_pending(db, cfs);
  };
  t.settled = wait_until_settled(pending, step, std::max(left_s, 0.0)) && background_errors == 0;
  t.compaction_s = seconds_since(step);
  t.gave_up_after_s = seconds_since(start);
  t.files_by_level = files_by_level(db, db->DefaultColumnFamily());
  if (background_errors > 0) {
    t.engine_errors = error_lines(path + "/LOG");
    if (t.engine_errors.empty()) t.engine_errors.push_back(std::to_string(background_errors) + " background error(s)");
  }
  step = SettleClock::now();
  if (!t.settled) rocksdb::CancelAllBackgroundWork(db, true);
  for (auto* cf : cfs) db->DestroyColumnFamilyHandle(cf);
  delete db;
  t.close_s = seconds_since(step);
  t.sst_bytes = bytes_of_files(path, {".sst"});
  return settle_result(t);
}

}  // namespace kvbench
