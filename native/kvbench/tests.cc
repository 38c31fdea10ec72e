// Unit tests of the generators and the histogram (the engines are tested from Python on real stores), of
// LevelDB's options that the tunable build adds, and of phases run on several threads against both stores. Built twice: kvbench_tests (the system's LevelDB) and
// kvbench_tests_tunable (the patched one, native/leveldb/).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "engine.h"
#include "generators.h"
#include "histogram.h"
#include "scan_lengths.h"
#include "settle.h"
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

TEST(Settle, ATableInNoLevelIsWaitedForWhileItGrowsAndNotOnceItStops) {
  TempStore store;
  std::filesystem::create_directories(store.path);
  auto write = [&](const std::string& name, size_t bytes) {
    std::ofstream(store.path + "/" + name, std::ios::app) << std::string(bytes, 'x');
  };
  write("000007.ldb", 100);  // listed: never waited for
  write("000009.ldb", 100);  // in no level
  write("000009.log", 100);  // not a table
  UnlistedTables unlisted(store.path, ".ldb", 0.2);
  EXPECT_TRUE(unlisted.being_written({7}));  // new
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  write("000009.ldb", 100);
  EXPECT_TRUE(unlisted.being_written({7}));  // grew
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  EXPECT_TRUE(unlisted.being_written({7}));  // unchanged for less than 0.2 s
  EXPECT_TRUE(unlisted.left_behind().empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  EXPECT_FALSE(unlisted.being_written({7}));  // unchanged for 0.24 s: left behind
  EXPECT_EQ(unlisted.left_behind(), std::vector<std::string>{"000009.ldb"});
  EXPECT_FALSE(unlisted.being_written({7, 9}));  // listed now (a compaction installed it)
  EXPECT_TRUE(unlisted.left_behind().empty());
}

TEST(Settle, AnEnginesErrorLinesAreReadFromItsLog) {
  TempStore store;
  std::filesystem::create_directories(store.path);
  std::ofstream(store.path + "/LOG") << "2026/11/27-04:35:13 (ignoring error) 000006.log: dropping 76 bytes; "
                                        "Corruption: truncated record at end of file\n"
                                     << "2026/11/27-04:35:14 Compacting 1@1 + 4@2 files\n"
                                     << "2026/11/27-04:35:15 Compaction error: IO error: 000123.ldb: No space\n"
                                     << "2026/11/27-04:35:15 Waiting after background compaction error: IO error\n";
  auto lines = error_lines(store.path + "/LOG");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("Compaction error: IO error"), std::string::npos);
  EXPECT_TRUE(error_lines(store.path + "/missing").empty());
}

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

TEST(LevelDbOptions, AStoreSaysWhatItWasOpenedWithTheRestAtLevelDbsDefaults) {
  TempStore store;
  auto engine = open_leveldb(store.path, {{"write_buffer_size", "8388608"}, {"compression", "none"},
                                          {"block_cache_size", "16777216"}, {"bloom_bits", "10"},
                                          {"paranoid_checks", "true"}}, false);
  const nlohmann::json opened = engine->options();
  EXPECT_EQ(opened.at("write_buffer_size"), 8388608);
  EXPECT_EQ(opened.at("compression"), "none");
  EXPECT_EQ(opened.at("block_cache_size"), 16777216);
  EXPECT_EQ(opened.at("bloom_bits"), 10);
  EXPECT_EQ(opened.at("paranoid_checks"), true);
  EXPECT_EQ(opened.at("block_size"), 4096);  // not in the config: LevelDB's own default
  EXPECT_EQ(opened.at("max_open_files"), 1000);
  EXPECT_EQ(opened.contains("level0_stop_writes_trigger"), leveldb_tunable());  // the tunable build's own options
}

TEST(LevelDbConstants, AnUnknownNameIsOursInEitherBuild) {
  TempStore store;
  EXPECT_FALSE(refusal(store.path, {{"level0_trigger", "4"}}).refused);  // exit 2
}

// ------------------------------------------------------------------ threads

TEST(Threads, SlicesCoverEveryItemOnceWithTheRemainderToTheFirstThreads) {
  std::vector<uint64_t> sizes;
  uint64_t next = 0;
  for (unsigned t = 0; t < 4; ++t) {
    Slice part = slice_of(10, t, 4);
    EXPECT_EQ(part.begin, next);
    sizes.push_back(part.end - part.begin);
    next = part.end;
  }
  EXPECT_EQ(next, 10u);
  EXPECT_EQ(sizes, (std::vector<uint64_t>{3, 3, 2, 2}));
  EXPECT_EQ(slice_of(2, 3, 4).begin, slice_of(2, 3, 4).end);  // more threads than items: the last have none
}

TEST(Threads, TheSpecFieldIsAWholeNumberFromOneTo1024) {
  auto with = [](const std::string& threads) {
    return parse_spec(nlohmann::json::parse(R"({"record_count": 10, "phases": [{"kind": "fill"}])" +
                                            (threads.empty() ? "" : R"(, "threads": )" + threads) + "}"));
  };
  EXPECT_EQ(with("").threads, 1u);
  EXPECT_EQ(with("1024").threads, 1024u);
  for (const char* bad : {"0", "1025", "-2", "2.5", "true", "\"4\""}) EXPECT_THROW(with(bad), SpecError) << bad;
}

namespace {

// Runs `spec_text` (with "threads": 4) on a fresh store of `engine` and returns the result's phases by name.
std::map<std::string, nlohmann::json> run_four_threads(const std::string& engine, const std::string& path,
                                                       const std::string& spec_text, std::ostream& progress,
                                                       double interval_s = 60) {
  nlohmann::json json = nlohmann::json::parse(spec_text);
  json["threads"] = 4;
  Spec spec = parse_spec(json);
  auto store = engine == "rocksdb" ? open_rocksdb(path, {}, false, false) : open_leveldb(path, {}, false);
  nlohmann::json result = run(*store, spec, interval_s, progress);
  std::map<std::string, nlohmann::json> phases;
  for (const auto& phase : result["phases"]) phases[phase["name"].get<std::string>()] = phase;
  return phases;
}

const char* const kEngines[] = {"rocksdb", "leveldb"};

}  // namespace

TEST(Threads, AShuffledFillThenReadFindsEveryKeyExactlyOnce) {
  TempStore store;
  for (const char* engine : kEngines) {
    std::ostringstream progress;
    auto phases = run_four_threads(engine, store.path, R"({"record_count": 5001, "phases": [
        {"name": "fill", "kind": "fill", "order": "shuffled"}, {"name": "read", "kind": "read", "order": "shuffled"},
        {"name": "scan", "kind": "readseq"}, {"name": "delete", "kind": "delete", "order": "sequential"},
        {"name": "gone", "kind": "read", "order": "shuffled"}]})", progress);
    EXPECT_EQ(phases["fill"]["threads"], 4) << engine;
    EXPECT_EQ(phases["fill"]["ops"], 5001) << engine;
    EXPECT_EQ(phases["read"]["found"], 5001) << engine;
    EXPECT_EQ(phases["read"]["not_found"], 0) << engine;
    EXPECT_EQ(phases["scan"]["threads"], 1) << engine;  // readseq walks the store on one thread
    EXPECT_EQ(phases["scan"]["keys_seen"], 5001) << engine;  // every key written once: none twice, none missed
    EXPECT_EQ(phases["gone"]["found"], 0) << engine;
    EXPECT_EQ(phases["gone"]["not_found"], 5001) << engine;
  }
}

TEST(Threads, RandomOrderSplitsTheCountExactly) {
  TempStore store;
  for (const char* engine : kEngines) {
    std::ostringstream progress;
    auto phases = run_four_threads(engine, store.path, R"({"record_count": 2000, "phases": [
        {"name": "fill", "kind": "fill", "order": "sequential"},
        {"name": "read", "kind": "read", "order": "random", "count": 3003}]})", progress);
    EXPECT_EQ(phases["read"]["ops"], 3003) << engine;
    EXPECT_EQ(phases["read"]["latency_us"]["get"]["count"], 3003) << engine;
    EXPECT_EQ(phases["read"]["found"], 3003) << engine;  // drawn among keys that all exist
  }
}

TEST(Threads, AMixWithInsertsLeavesExactlyTheRecordsPlusItsInserts) {
  TempStore store;
  for (const char* engine : kEngines) {
    for (const char* distribution : {"latest", "uniform"}) {
      std::ostringstream progress;
      auto phases = run_four_threads(engine, store.path, std::string(R"({"record_count": 1000, "phases": [
          {"name": "fill", "kind": "fill", "order": "shuffled"},
          {"name": "run", "kind": "mix", "count": 6001, "mix": {"read": 0.5, "insert": 0.3, "rmw": 0.2},
           "distribution": ")") + distribution + R"("}, {"name": "scan", "kind": "readseq"}]})", progress);
      const nlohmann::json& mix = phases["run"];
      SCOPED_TRACE(std::string(engine) + " " + distribution);
      EXPECT_EQ(mix["ops"], 6001);
      EXPECT_EQ(mix["inserted"], mix["latency_us"]["insert"]["count"]);
      EXPECT_EQ(mix["latency_all_us"]["count"], 6001);  // every kind's operations in the phase's own histogram
      EXPECT_GE(mix["latency_all_us"]["max"].get<double>(), mix["latency_us"]["insert"]["max"].get<double>());
      EXPECT_GT(mix["inserted"].get<uint64_t>(), 1000u);
      EXPECT_EQ(mix["not_found"], 0);  // reads draw only among published keys: every one is there
      EXPECT_EQ(phases["scan"]["keys_seen"], 1000 + mix["inserted"].get<uint64_t>());  // inserted keys unique
    }
  }
}

TEST(Threads, ProgressSumsEveryThreadsOperations) {
  TempStore store;
  std::ostringstream progress;
  auto phases = run_four_threads("leveldb", store.path, R"({"record_count": 30000, "phases": [
      {"name": "fill", "kind": "fill", "order": "shuffled"}]})", progress, 0.002);
  std::istringstream lines(progress.str());
  uint64_t last = 0, reports = 0;
  for (std::string line; std::getline(lines, line); ++reports) {
    nlohmann::json report = nlohmann::json::parse(line);
    EXPECT_EQ(report["phase"], "fill");
    EXPECT_GE(report["ops"].get<uint64_t>(), last);
    last = report["ops"].get<uint64_t>();
  }
  EXPECT_GT(reports, 0u) << "a fill of 30,000 keys took under 2 ms";
  EXPECT_LE(last, 30000u);
}

// A scan-length file (native/scanlog/scan_log.h's format) written to a temporary path.
std::string scan_file(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::temp_directory_path() / (name + "-" + std::to_string(getpid()))).string();
  std::ofstream(path) << text;
  return path;
}

TEST(ScanLengths, MatchesByColumnFamilyKindAndKeyInTheOrderTheSeeksBegan) {
  // Written as the scans ended: the seek of 7 steps (begun at 1000) ended after the seek of 3 (begun at 1001).
  const std::string path = scan_file("scans-order", "knobtune-scans 1\n"
                                     "0\tseek\t1001\t3\t0\tmore\t6b31\n"
                                     "0\tseek\t1000\t7\t0\tmore\t6b31\n"
                                     "1\tseek\t1002\t9\t0\tend\t6b31\n"
                                     "0\tseek_for_prev\t1003\t0\t20\tmore\t6b31\n");
  ScanLengths lengths(path);
  EXPECT_EQ(lengths.match(0, false, "k1", 1000).next, 7u);
  EXPECT_EQ(lengths.match(0, true, "k1", 1003).prev, 20u);
  EXPECT_EQ(lengths.match(0, false, "k1", 1001).next, 3u);
  const ScanSteps other_cf = lengths.match(1, false, "k1", 1002);
  EXPECT_TRUE(other_cf.matched && other_cf.at_end);
  EXPECT_EQ(other_cf.next, 9u);
  EXPECT_FALSE(lengths.match(0, false, "k1", 1004).matched);  // none left: the seek replays alone
  EXPECT_FALSE(lengths.match(0, false, "k2", 1004).matched);
  EXPECT_EQ(lengths.summary()["matched"], 4u);
  std::filesystem::remove(path);
}

TEST(ScanLengths, DropsScansMuchOlderThanTheTracedSeek) {
  // A scan begun 5 s before the traced seek of its key is one the tracer did not record (tracing began later).
  const std::string path = scan_file("scans-old", "knobtune-scans 1\n0\tseek\t1000000\t4\t0\tmore\t6b31\n"
                                     "0\tseek\t6000000\t2\t0\tmore\t6b31\n");
  ScanLengths lengths(path);
  EXPECT_EQ(lengths.match(0, false, "k1", 6000010).next, 2u);
  EXPECT_EQ(lengths.summary()["dropped"], 1u);
  std::filesystem::remove(path);
}

TEST(ScanLengths, RefusesFilesThatAreNotVersionOne) {
  for (const std::string& text : {std::string("0\tseek\t1\t1\t0\tmore\t6b31\n"), std::string("knobtune-scans 2\n"),
                                  std::string("knobtune-scans 1\n0\tseek\t1\t1\t0\tmore\n"),
                                  std::string("knobtune-scans 1\n0\tscan\t1\t1\t0\tmore\t6b31\n"),
                                  std::string("knobtune-scans 1\n0\tseek\t1\t1\t0\tmore\t6b3\n"),
                                  std::string("knobtune-scans 1\n0\tseek\t1\t-1\t0\tmore\t6b31\n"),
                                  std::string("knobtune-scans 1\n0\tseek\t1\t1\t0\tmore\t6b31")}) {
    const std::string path = scan_file("scans-bad", text);
    EXPECT_THROW(ScanLengths{path}, ScanFileError) << text;
    std::filesystem::remove(path);
  }
}
