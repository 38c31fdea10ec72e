// What the RocksDB engine shares with the replay (replay.cc): options from a config map, the counters, the version.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>
#include <rocksdb/db.h>
#include <rocksdb/statistics.h>

#include "engine.h"

namespace kvbench {

// RocksDB's options under `config` (option name -> text, plus the keys the driver turns into objects: the block
// cache, the bloom filter, the memtable). `tickers` not null: a Statistics object is made, set and returned there.
// Throws ConfigError (refused: a bad value; not refused: a name RocksDB lacks).
rocksdb::Options rocksdb_options(const Config& config, std::shared_ptr<rocksdb::Statistics>* tickers);

// The store's own counters over a run (knobtune/systems/rocksdb/counters.toml).
nlohmann::json rocksdb_counters(rocksdb::DB* db, const std::shared_ptr<rocksdb::Statistics>& stats);

// "7.8.3 (release: ...)": the version and the build kvbench was linked with.
std::string engine_version();

}  // namespace kvbench
