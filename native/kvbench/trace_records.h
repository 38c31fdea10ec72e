// A RocksDB trace's records as the replay and its readers take them apart, and the store a trace runs on; shared by
// replay.cc (the replay) and trace_records.cc (inspect_trace and digest_rocksdb, which replay nothing).
#pragma once

#include <rocksdb/db.h>
#include <rocksdb/statistics.h>
#include <rocksdb/trace_record.h>
#include <rocksdb/utilities/replayer.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine.h"
#include "scan_lengths.h"

namespace kvbench {

// A record's kind as the replay's latencies name it: write, get, seek, seek_for_prev, multiget or other.
const char* kind_of(rocksdb::TraceType type);

bool is_seek(rocksdb::TraceType type);

// What a write batch holds: its operations by kind, its first key, the sizes of its keys and values.
struct BatchContents {
  std::map<std::string, uint64_t> ops;
  std::string first_key;
  uint64_t keys = 0, key_bytes = 0, value_bytes = 0;
};

// The batch of a write record; a damaged batch throws TraceError.
BatchContents read_batch(const rocksdb::TraceRecord& record);

// The key that decides a record's replay thread (operations on one key stay on one thread, in order).
std::string first_key_of(const rocksdb::TraceRecord& record);

// The application's recorded steps after a seek record (`lengths` matches every seek, in the trace's order).
ScanSteps seek_steps(ScanLengths& lengths, const rocksdb::TraceRecord& seek);

// Prepare a replayer over `trace` for `db`, or throw TraceError saying why the file is no trace knobtune can use.
std::unique_ptr<rocksdb::Replayer> open_replayer(rocksdb::DB* db, const std::vector<rocksdb::ColumnFamilyHandle*>& cfs,
                                                 const std::string& trace);

// The next query record, or null at the end; a record cut short or damaged throws TraceError.
std::unique_ptr<rocksdb::TraceRecord> next_record(rocksdb::Replayer& replayer, uint64_t* skipped);

struct Opened {
  rocksdb::DB* db = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> cfs;
  std::shared_ptr<rocksdb::Statistics> tickers;
};

// Open the store at `path` (every column family it has) under `config`; a new store when there is none.
Opened open_store(const std::string& path, const Config& config, bool statistics);

}  // namespace kvbench
