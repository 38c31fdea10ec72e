#include <leveldb/cache.h>
#include <leveldb/db.h>
#include <leveldb/filter_policy.h>
#include <leveldb/write_batch.h>

#include "engine.h"

namespace kvbench {
namespace {

class LevelDbEngine : public Engine {
 public:
  LevelDbEngine(leveldb::DB* db, leveldb::Cache* cache, const leveldb::FilterPolicy* filter, bool sync)
      : db_(db), cache_(cache), filter_(filter) { write_.sync = sync; }
  ~LevelDbEngine() override { delete db_; delete cache_; delete filter_; }

  void put(std::string_view key, std::string_view value) override {
    check(db_->Put(write_, leveldb::Slice(key.data(), key.size()), leveldb::Slice(value.data(), value.size())));
  }
  Lookup get(std::string_view key) override {
    leveldb::Status s = db_->Get(leveldb::ReadOptions(), leveldb::Slice(key.data(), key.size()), &value_);
    if (s.IsNotFound()) return Lookup::kNotFound;
    check(s);
    return Lookup::kFound;
  }
  void remove(std::string_view key) override { check(db_->Delete(write_, leveldb::Slice(key.data(), key.size()))); }
  uint64_t scan(const std::string& start, uint64_t limit) override {
    std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
    uint64_t seen = count_keys(it.get(), start, limit);
    check(it->status());
    return seen;
  }
  std::string version() const override {
    return std::to_string(leveldb::kMajorVersion) + "." + std::to_string(leveldb::kMinorVersion);
  }

 private:
  static void check(const leveldb::Status& s) { if (!s.ok()) throw IoError(s.ToString()); }
  leveldb::DB* db_;
  leveldb::Cache* cache_;
  const leveldb::FilterPolicy* filter_;
  leveldb::WriteOptions write_;
  std::string value_;  // LevelDB copies every value out; one buffer, reused
};

}  // namespace

std::unique_ptr<Engine> open_leveldb(const std::string& path, const Config& config, bool sync) {
  leveldb::Options options;
  options.create_if_missing = true;
  options.error_if_exists = true;
  leveldb::Cache* cache = nullptr;
  const leveldb::FilterPolicy* filter = nullptr;
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
      cache = leveldb::NewLRUCache(parse_uint(key, value));
      options.block_cache = cache;
    } else if (key == "bloom_bits") {
      uint64_t bits = parse_uint(key, value);
      if (bits > 0) { filter = leveldb::NewBloomFilterPolicy(static_cast<int>(bits)); options.filter_policy = filter; }
    } else {
      throw ConfigError("unknown LevelDB option '" + key + "'", false);
    }
  }
  leveldb::DestroyDB(path, leveldb::Options());
  leveldb::DB* db = nullptr;
  leveldb::Status s = leveldb::DB::Open(options, path, &db);
  if (!s.ok()) {
    delete cache; delete filter;
    throw ConfigError("database refused config: " + s.ToString(), true);
  }
  return std::make_unique<LevelDbEngine>(db, cache, filter, sync);
}

}  // namespace kvbench
