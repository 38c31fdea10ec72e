#include "trace_records.h"

#include <rocksdb/trace_reader_writer.h>
#include <rocksdb/trace_record.h>
#include <rocksdb/utilities/options_util.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "engine_rocksdb.h"
#include "replay.h"
#include "settle.h"

namespace kvbench {
namespace {

// Reads a write batch into its contents.
class BatchReader : public rocksdb::WriteBatch::Handler {
 public:
  rocksdb::Status PutCF(uint32_t, const rocksdb::Slice& key, const rocksdb::Slice& value) override {
    return note("put", key, value.size());
  }
  rocksdb::Status DeleteCF(uint32_t, const rocksdb::Slice& key) override { return note("delete", key, 0); }
  rocksdb::Status SingleDeleteCF(uint32_t, const rocksdb::Slice& key) override {
    return note("single_delete", key, 0);
  }
  rocksdb::Status DeleteRangeCF(uint32_t, const rocksdb::Slice& begin, const rocksdb::Slice&) override {
    return note("delete_range", begin, 0);
  }
  rocksdb::Status MergeCF(uint32_t, const rocksdb::Slice& key, const rocksdb::Slice& value) override {
    return note("merge", key, value.size());
  }
  void LogData(const rocksdb::Slice&) override {}

  BatchContents contents;

 private:
  rocksdb::Status note(const char* kind, const rocksdb::Slice& key, size_t value_size) {
    if (contents.keys++ == 0) contents.first_key = key.ToString();
    ++contents.ops[kind];
    contents.key_bytes += key.size();
    contents.value_bytes += value_size;
    return rocksdb::Status::OK();
  }
};

}  // namespace

const char* kind_of(rocksdb::TraceType type) {
  switch (type) {
    case rocksdb::kTraceWrite: return "write";
    case rocksdb::kTraceGet: return "get";
    case rocksdb::kTraceIteratorSeek: return "seek";
    case rocksdb::kTraceIteratorSeekForPrev: return "seek_for_prev";
    case rocksdb::kTraceMultiGet: return "multiget";
    default: return "other";
  }
}

bool is_seek(rocksdb::TraceType type) {
  return type == rocksdb::kTraceIteratorSeek || type == rocksdb::kTraceIteratorSeekForPrev;
}

BatchContents read_batch(const rocksdb::TraceRecord& record) {
  const auto& write = static_cast<const rocksdb::WriteQueryTraceRecord&>(record);
  rocksdb::WriteBatch batch(write.GetWriteBatchRep().ToString());
  BatchReader reader;
  rocksdb::Status s = batch.Iterate(&reader);
  if (!s.ok()) throw TraceError("a write batch in the trace is damaged: " + s.ToString());
  return reader.contents;
}

std::string first_key_of(const rocksdb::TraceRecord& record) {
  switch (record.GetTraceType()) {
    case rocksdb::kTraceGet: return static_cast<const rocksdb::GetQueryTraceRecord&>(record).GetKey().ToString();
    case rocksdb::kTraceIteratorSeek:
    case rocksdb::kTraceIteratorSeekForPrev:
      return static_cast<const rocksdb::IteratorSeekQueryTraceRecord&>(record).GetKey().ToString();
    case rocksdb::kTraceMultiGet: {
      auto keys = static_cast<const rocksdb::MultiGetQueryTraceRecord&>(record).GetKeys();
      return keys.empty() ? std::string() : keys.front().ToString();
    }
    case rocksdb::kTraceWrite: return read_batch(record).first_key;
    default: return std::string();
  }
}

ScanSteps seek_steps(ScanLengths& lengths, const rocksdb::TraceRecord& record) {
  const auto& seek = static_cast<const rocksdb::IteratorSeekQueryTraceRecord&>(record);
  return lengths.match(seek.GetColumnFamilyID(),
                       seek.GetSeekType() == rocksdb::IteratorSeekQueryTraceRecord::kSeekForPrev,
                       seek.GetKey().ToString(), seek.GetTimestamp());
}

std::unique_ptr<rocksdb::Replayer> open_replayer(rocksdb::DB* db, const std::vector<rocksdb::ColumnFamilyHandle*>& cfs,
                                                 const std::string& trace) {
  if (!std::filesystem::is_regular_file(trace)) throw TraceError("no trace file '" + trace + "'");
  std::unique_ptr<rocksdb::TraceReader> reader;
  rocksdb::Status s = rocksdb::NewFileTraceReader(db->GetEnv(), rocksdb::EnvOptions(), trace, &reader);
  if (!s.ok()) throw TraceError("cannot read the trace '" + trace + "': " + s.ToString());
  std::unique_ptr<rocksdb::Replayer> replayer;
  s = db->NewDefaultReplayer(cfs, std::move(reader), &replayer);
  if (s.ok()) s = replayer->Prepare();
  if (!s.ok()) throw TraceError("'" + trace + "' is not a RocksDB trace (its header: " + s.ToString() + ")");
  return replayer;
}

std::unique_ptr<rocksdb::TraceRecord> next_record(rocksdb::Replayer& replayer, uint64_t* skipped) {
  for (;;) {
    std::unique_ptr<rocksdb::TraceRecord> record;
    rocksdb::Status s = replayer.Next(&record);
    if (s.ok()) return record;
    if (s.IsIncomplete()) return nullptr;  // the end of the trace
    if (s.IsNotSupported()) {  // a kind the replayer does not run (block-cache records): not a query
      ++*skipped;
      continue;
    }
    throw TraceError("the trace is cut short or damaged after its readable records: " + s.ToString());
  }
}

Opened open_store(const std::string& path, const Config& config, bool statistics) {
  Opened opened;
  rocksdb::Options options = rocksdb_options(config, statistics ? &opened.tickers : nullptr);
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  std::vector<std::string> names{rocksdb::kDefaultColumnFamilyName};
  if (std::filesystem::exists(std::filesystem::path(path) / "CURRENT")) {
    rocksdb::Status s = rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(options), path, &names);
    if (!s.ok()) throw IoError("cannot list the column families of the store in '" + path + "': " + s.ToString());
  }
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const auto& name : names) descriptors.emplace_back(name, rocksdb::ColumnFamilyOptions(options));
  rocksdb::Status s = rocksdb::DB::Open(rocksdb::DBOptions(options), path, descriptors, &opened.cfs, &opened.db);
  if (!s.ok()) throw ConfigError("database refused config: " + s.ToString(), true);
  return opened;
}

nlohmann::json inspect_trace(const std::string& trace, const std::string& scratch, const std::string& scans) {
  std::unique_ptr<ScanLengths> lengths = scans.empty() ? nullptr : std::make_unique<ScanLengths>(scans);
  Opened store = open_store(scratch, Config{}, false);
  std::unique_ptr<rocksdb::Replayer> replayer = open_replayer(store.db, store.cfs, trace);
  std::map<std::string, uint64_t> mix;
  uint64_t records = 0, skipped = 0, first_ts = 0, last_ts = 0, keys = 0, key_bytes = 0, value_bytes = 0, writes = 0;
  while (auto record = next_record(*replayer, &skipped)) {
    const uint64_t ts = record->GetTimestamp();
    if (records++ == 0) first_ts = ts;
    last_ts = std::max(last_ts, ts);
    const rocksdb::TraceType type = record->GetTraceType();
    if (type == rocksdb::kTraceWrite) {
      const BatchContents batch = read_batch(*record);
      for (const auto& [kind, count] : batch.ops) mix[kind] += count;
      keys += batch.keys;
      key_bytes += batch.key_bytes;
      value_bytes += batch.value_bytes;
      ++writes;
    } else {
      ++mix[kind_of(type)];
      if (lengths && is_seek(type)) seek_steps(*lengths, *record);
      std::string key = first_key_of(*record);
      ++keys;
      key_bytes += key.size();
    }
  }
  for (auto* cf : store.cfs) store.db->DestroyColumnFamilyHandle(cf);
  delete store.db;
  return {{"records", records}, {"skipped", skipped}, {"write_batches", writes}, {"mix", mix},
          {"span_s", (last_ts - first_ts) / 1e6}, {"first_timestamp_us", first_ts}, {"keys", keys},
          {"mean_key_bytes", keys ? static_cast<double>(key_bytes) / keys : 0.0},
          {"mean_value_bytes", mix.count("put") || mix.count("merge")
                                   ? static_cast<double>(value_bytes) / (mix["put"] + mix["merge"]) : 0.0},
          {"scans", lengths ? lengths->summary() : nlohmann::json(nullptr)}, {"engine_version", engine_version()}};
}

nlohmann::json digest_rocksdb(const std::string& path) {
  require_store(path);
  rocksdb::ConfigOptions load;
  load.ignore_unknown_options = true;
  rocksdb::DBOptions db_options;
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  std::shared_ptr<rocksdb::Cache> cache = rocksdb::NewLRUCache(8 << 20);
  rocksdb::Status s = rocksdb::LoadLatestOptions(load, path, &db_options, &descriptors, &cache);
  if (!s.ok()) throw NoStoreError("cannot read the store's OPTIONS file: " + s.ToString());
  std::vector<rocksdb::ColumnFamilyHandle*> cfs;
  rocksdb::DB* db = nullptr;
  s = rocksdb::DB::OpenForReadOnly(db_options, path, descriptors, &cfs, &db);
  if (!s.ok()) throw IoError("cannot open the store read-only for its digest: " + s.ToString());
  uint64_t hash = 1469598103934665603ULL, keys = 0, bytes = 0;
  auto mix = [&](const rocksdb::Slice& text) {
    for (int shift = 0; shift < 64; shift += 8) hash = (hash ^ ((text.size() >> shift) & 0xff)) * 1099511628211ULL;
    for (size_t i = 0; i < text.size(); ++i) hash = (hash ^ static_cast<unsigned char>(text[i])) * 1099511628211ULL;
    bytes += text.size();
  };
  rocksdb::ReadOptions read;
  read.total_order_seek = true;  // a prefix extractor must not hide keys
  read.fill_cache = false;
  for (auto* cf : cfs) {
    mix(cf->GetName());
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(read, cf));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      mix(it->key());
      mix(it->value());
      ++keys;
    }
    if (!it->status().ok()) throw IoError("reading the store for its digest failed: " + it->status().ToString());
  }
  for (auto* cf : cfs) db->DestroyColumnFamilyHandle(cf);
  delete db;
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(hash));
  return {{"digest", text}, {"keys", keys}, {"bytes", bytes}, {"column_families", descriptors.size()}};
}

}  // namespace kvbench
