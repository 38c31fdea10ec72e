// Unit tests of the generators and the histogram (the engines are tested from Python on real stores), and of
// LevelDB's options that the tunable build adds. Built twice: kvbench_tests (the system's LevelDB) and
// kvbench_tests_tunable (the patched one, native/leveldb/).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "engine.h"
#include "generators.h"
#include "histogram.h"
#include "workload.h"

using namespace kvbench;

TEST(Orders, ShuffledIsAPermutationAndSeeded) {
  auto a = ordered_indices(10000, true, 7), b = ordered_indices(10000, true, 7), c = ordered_indices(10000, true, 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  std::sort(a.begin(), a.end());
  for (uint64_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], i);
}

TEST(Keys, DistinctAndFixedWidth) {
  std::set<std::string> keys;
  for (uint64_t i = 0; i < 100000; ++i) keys.insert(make_key(i, 16));
  EXPECT_EQ(keys.size(), 100000u);
  EXPECT_EQ(make_key(5, 16).size(), 16u);
}

TEST(Zipfian, SkewedTowardsLowRanks) {
  Zipfian zipf(10000, 0.99);
  std::mt19937_64 rng(1);
  std::map<uint64_t, int> counts;
  for (int i = 0; i < 200000; ++i) ++counts[zipf.next(rng)];
  EXPECT_GT(counts[0], counts[9]);
  EXPECT_GT(counts[9], counts[99]);
  int top = 0;
  for (uint64_t r = 0; r < 100; ++r) top += counts[r];
  EXPECT_GT(top, 200000 * 0.4);  // the top 1% of 10,000 items draws a large share
}

TEST(Zipfian, ScrambledSpreadsHotKeysButStaysSkewed) {
  ScrambledZipfian zipf(0.99);
  std::mt19937_64 rng(2);
  std::map<uint64_t, int> counts;
  for (int i = 0; i < 200000; ++i) ++counts[zipf.next(rng, 10000)];
  std::vector<int> freq;
  for (auto& [k, v] : counts) freq.push_back(v);
  std::sort(freq.rbegin(), freq.rend());
  EXPECT_GT(freq[0], 20 * 200000 / 10000);  // the hottest key is far above uniform
}

TEST(Mix, ProportionsAndDeterminism) {
  auto spec = parse_spec(nlohmann::json::parse(
      R"({"record_count": 100, "phases": [{"kind": "mix", "count": 10, "mix": {"read": 0.95, "update": 0.05}}]})"));
  EXPECT_DOUBLE_EQ(spec.phases[0].mix.read, 0.95);
  EXPECT_THROW(parse_spec(nlohmann::json::parse(R"({"record_count": 1, "phases": [{"kind": "nope"}]})")), SpecError);
}

TEST(Histogram, PercentilesWithinTwoPercent) {
  Histogram h;
  for (uint64_t v = 1; v <= 100000; ++v) h.add(v * 1000);  // 1..100000 µs
  EXPECT_NEAR(h.percentile_us(0.5), 50000, 50000 * 0.02);
  EXPECT_NEAR(h.percentile_us(0.99), 99000, 99000 * 0.02);
  EXPECT_DOUBLE_EQ(h.max_us(), 100000);
}

TEST(Keys, DbBenchFormatIsTheBigEndianIndexPadded) {
  std::string key = db_bench_key(1, 16);
  EXPECT_EQ(key, std::string("\0\0\0\0\0\0\0\x01", 8) + "00000000");
  EXPECT_EQ(db_bench_key(0x0102030405060708ULL, 8), "\x01\x02\x03\x04\x05\x06\x07\x08");
  EXPECT_NE(make_key(1, 16), db_bench_key(1, 16));  // kvbench hashes the index first
}

TEST(Settle, SpecFieldsAndErrors) {
  auto spec = parse_settle_spec(nlohmann::json::parse(
      R"({"record_count": 10, "key_format": "db_bench", "compaction_limit_s": 2.5, "config": {"a": "1"}})"));
  EXPECT_EQ(spec.key_format, "db_bench");
  EXPECT_DOUBLE_EQ(spec.compaction_limit_s, 2.5);
  EXPECT_EQ(spec.config.at("a"), "1");
  EXPECT_EQ(spec.probe_keys, 1000u);
  EXPECT_THROW(parse_settle_spec(nlohmann::json::parse(R"({"record_count": 0})")), SpecError);
  EXPECT_THROW(parse_settle_spec(nlohmann::json::parse(R"({"record_count": 1, "key_format": "ycsb"})")), SpecError);
  EXPECT_THROW(parse_settle_spec(nlohmann::json::parse(R"({"record_count": "x"})")), SpecError);
}

namespace {

// A fresh folder for a store, removed at the end of the test.
struct TempStore {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("kvbench-test-" + std::to_string(getpid()) + "-" +
                       ::testing::UnitTest::GetInstance()->current_test_info()->name())).string();
  ~TempStore() { std::filesystem::remove_all(path); }
};

// The ConfigError opening LevelDB under `config` throws (a failed expectation when it opens).
ConfigError refusal(const std::string& path, const Config& config) {
  try {
    open_leveldb(path, config, false);
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "LevelDB opened under a config it should refuse";
  return ConfigError("", false);
}

}  // namespace

TEST(LevelDbConstants, TheTunableBuildTakesThemAndLevelDbChecksTheirRelations) {
  if (!leveldb_tunable()) GTEST_SKIP() << "this build links the system's LevelDB";
  TempStore store;
  EXPECT_NE(open_leveldb(store.path, {{"level0_file_num_compaction_trigger", "12"},
                                      {"level0_slowdown_writes_trigger", "16"},
                                      {"level0_stop_writes_trigger", "20"},
                                      {"max_mem_compact_level", "0"},
                                      {"read_bytes_period", "65536"}}, false),
            nullptr);
  ConfigError stop = refusal(store.path, {{"level0_stop_writes_trigger", "4"}});
  EXPECT_TRUE(stop.refused);
  EXPECT_NE(std::string(stop.what()).find("level0_stop_writes_trigger (4) must be >= level0_slowdown_writes_trigger (8)"),
            std::string::npos) << stop.what();
  EXPECT_TRUE(refusal(store.path, {{"max_mem_compact_level", "7"}}).refused);  // levels are 0..6
  EXPECT_TRUE(refusal(store.path, {{"read_bytes_period", "4294967296"}}).refused);  // over an int
}

TEST(LevelDbConstants, ThePlainBuildRefusesThemAsItsStores) {
  if (leveldb_tunable()) GTEST_SKIP() << "this build links the patched LevelDB";
  TempStore store;
  ConfigError e = refusal(store.path, {{"level0_file_num_compaction_trigger", "4"}});
  EXPECT_TRUE(e.refused);  // exit 3: the store refused, not knobtune's mistake
  EXPECT_NE(std::string(e.what()).find("kvbench-leveldb-tunable"), std::string::npos) << e.what();
}

TEST(LevelDbConstants, AnUnknownNameIsOursInEitherBuild) {
  TempStore store;
  EXPECT_FALSE(refusal(store.path, {{"level0_trigger", "4"}}).refused);  // exit 2
}
