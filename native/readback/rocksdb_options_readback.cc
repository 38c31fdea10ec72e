// rocksdb-options-readback: what RocksDB holds after it opens a database under an OPTIONS file.
//
//   rocksdb-options-readback OPTIONS_FILE DB_DIR
//
// Loads OPTIONS_FILE with rocksdb::LoadOptionsFromFile (as an application deploying an export would), opens a new
// database in DB_DIR with every column family it names, writes and flushes one key, and prints one JSON object:
// the OPTIONS file RocksDB itself wrote after opening (its path), the block cache's capacity as the library reports
// it ("rocksdb.block-cache-capacity", null without a block cache) and the row cache's (null without one).
// Exit status 1 with the library's message on stderr when the file does not load or the database does not open.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <rocksdb/cache.h>
#include <rocksdb/convenience.h>
#include <rocksdb/db.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/options_util.h>

namespace {

int fail(const std::string& what, const rocksdb::Status& status) {
  std::fprintf(stderr, "rocksdb-options-readback: %s: %s\n", what.c_str(), status.ToString().c_str());
  return 1;
}

nlohmann::json capacity(const std::shared_ptr<rocksdb::Cache>& cache) {
  return cache ? nlohmann::json(cache->GetCapacity()) : nlohmann::json(nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: rocksdb-options-readback OPTIONS_FILE DB_DIR\n");
    return 2;
  }
  const std::string options_file = argv[1], db_dir = argv[2];
  rocksdb::ConfigOptions config;
  config.ignore_unknown_options = false;  // a line RocksDB does not know is an error, never skipped
  config.input_strings_escaped = true;
  config.env = rocksdb::Env::Default();
  rocksdb::DBOptions db_options;
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  rocksdb::Status s = rocksdb::LoadOptionsFromFile(config, options_file, &db_options, &families);
  if (!s.ok()) return fail("LoadOptionsFromFile(" + options_file + ")", s);
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;

  rocksdb::DB* raw = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  s = rocksdb::DB::Open(db_options, db_dir, families, &handles, &raw);
  if (!s.ok()) return fail("DB::Open(" + db_dir + ")", s);
  std::unique_ptr<rocksdb::DB> db(raw);
  s = db->Put(rocksdb::WriteOptions(), handles[0], "knobtune", "readback");
  if (s.ok()) s = db->Flush(rocksdb::FlushOptions(), handles[0]);
  if (!s.ok()) return fail("writing one key", s);

  nlohmann::json out;
  uint64_t block_cache = 0;
  out["block_cache_capacity"] = db->GetIntProperty(handles[0], rocksdb::DB::Properties::kBlockCacheCapacity,
                                                   &block_cache)
                                    ? nlohmann::json(block_cache)
                                    : nlohmann::json(nullptr);
  out["row_cache_capacity"] = capacity(db->GetDBOptions().row_cache);
  std::string written;
  s = rocksdb::GetLatestOptionsFileName(db_dir, rocksdb::Env::Default(), &written);
  if (!s.ok()) return fail("GetLatestOptionsFileName", s);
  out["options_file"] = db_dir + "/" + written;
  for (auto* handle : handles) {
    s = db->DestroyColumnFamilyHandle(handle);
    if (!s.ok()) return fail("closing a column family", s);
  }
  s = db->Close();
  if (!s.ok()) return fail("DB::Close", s);
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
