// kvbench: run one workload under one config on RocksDB or LevelDB and print one JSON result.
//   kvbench --engine rocksdb|leveldb --db DIR --spec SPEC.json [--result OUT.json] [--interval-ms 1000]
//           [--crash-at-end 1]
//   kvbench --engine rocksdb|leveldb --db DIR --settle SETTLE.json [--result OUT.json]
//   kvbench --engine rocksdb --db DIR --replay REPLAY.json [--result OUT.json] [--interval-ms N] [--crash-at-end 1]
//   kvbench --engine rocksdb --db SCRATCH --inspect-trace TRACE [--scans SCANS] [--result OUT.json]
//   kvbench --engine rocksdb --db DIR --digest 1 [--result OUT.json]
// --replay replays a RocksDB trace (DB::StartTrace) onto the store in DIR under the spec's config (replay.h);
// --inspect-trace reads a trace without running it; --digest hashes every key and value of the store in DIR.
// --crash-at-end 1 ends the process with SIGKILL once the result is written, leaving the store as a crash
// would. --settle reopens such a store, times it until it answers, flushes it and waits for its compaction.
// Exit codes: 0 ok (settled); 2 bad input (args, spec, an option name the store lacks, unparsable text,
// no store to settle): the caller's bug, not the config's; 3 the store refused the config (or did not
// reopen); 4 I/O error during the run; 5 not settled within the settle spec's compaction_limit_s (the
// result is still written). Errors are one line on stderr starting "kvbench: error:".
#include <csignal>
#include <fstream>
#include <iostream>
#include <map>
#include <string>

#include "engine.h"
#include "replay.h"
#include "scan_lengths.h"
#include "settle.h"
#include "workload.h"

namespace {

const char* kUsage = "usage: kvbench --engine rocksdb|leveldb --db DIR (--spec SPEC.json | --settle SETTLE.json | "
                     "--replay REPLAY.json | --inspect-trace TRACE | --digest 1) [--result OUT.json] [--interval-ms N] "
                     "[--crash-at-end 0|1]";

int fail(int code, const std::string& message) {
  std::cerr << "kvbench: error: " << message << std::endl;
  return code;
}

// Print the result and write it to --result, flushed and closed.
void emit(const nlohmann::json& result, const std::map<std::string, std::string>& args) {
  const std::string text = result.dump(2);
  std::cout << text << std::endl;
  if (args.count("result")) {
    std::ofstream out(args.at("result"));
    out << text << std::endl;
  }
}

template <typename Parse>
bool read_json_file(const std::string& path, Parse&& parse, std::string* error) {
  std::ifstream file(path);
  if (!file) { *error = "cannot read the spec file '" + path + "'"; return false; }
  try {
    parse(nlohmann::json::parse(file));
  } catch (const nlohmann::json::parse_error& e) {
    *error = "spec '" + path + "' is not valid JSON at byte " + std::to_string(e.byte) + ": " + e.what();
    return false;
  } catch (const kvbench::SpecError& e) {
    *error = "spec '" + path + "': " + e.what();
    return false;
  }
  return true;
}

int settle(const std::string& engine, const std::map<std::string, std::string>& args) {
  kvbench::SettleSpec spec;
  std::string error;
  if (!read_json_file(args.at("settle"), [&](const nlohmann::json& j) { spec = kvbench::parse_settle_spec(j); },
                      &error))
    return fail(2, error);
  try {
    nlohmann::json result = engine == "rocksdb" ? kvbench::settle_rocksdb(args.at("db"), spec)
                                                : kvbench::settle_leveldb(args.at("db"), spec);
    result["engine"] = engine;
    emit(result, args);
    return result["settled"].get<bool>() ? 0 : 5;
  } catch (const kvbench::NoStoreError& e) {
    return fail(2, e.what());
  } catch (const kvbench::ConfigError& e) {
    return fail(e.refused ? 3 : 2, e.what());
  } catch (const kvbench::IoError& e) {
    return fail(4, std::string("I/O error while settling: ") + e.what());
  }
}

// --replay, --inspect-trace and --digest: RocksDB's traces (replay.h).
int trace_mode(const std::map<std::string, std::string>& args, bool crash_at_end, double interval_s) {
  try {
    if (args.count("inspect-trace")) {
      emit(kvbench::inspect_trace(args.at("inspect-trace"), args.at("db"), args.count("scans") ? args.at("scans") : ""),
           args);
      return 0;
    }
    if (args.count("digest")) {
      emit(kvbench::digest_rocksdb(args.at("db")), args);
      return 0;
    }
    kvbench::ReplaySpec spec;
    std::string error;
    if (!read_json_file(args.at("replay"), [&](const nlohmann::json& j) { spec = kvbench::parse_replay_spec(j); },
                        &error))
      return fail(2, error);
    nlohmann::json result = kvbench::replay_rocksdb(args.at("db"), spec, interval_s, std::cerr);
    result["engine"] = "rocksdb";
    emit(result, args);
    if (crash_at_end) std::raise(SIGKILL);  // as a crash would: the store is never closed
    return 0;
  } catch (const kvbench::TraceError& e) {
    return fail(2, std::string("trace: ") + e.what());
  } catch (const kvbench::ScanFileError& e) {
    return fail(2, std::string("scans: ") + e.what());
  } catch (const kvbench::NoStoreError& e) {
    return fail(2, e.what());
  } catch (const kvbench::ConfigError& e) {
    return fail(e.refused ? 3 : 2, e.what());
  } catch (const kvbench::IoError& e) {
    return fail(4, std::string("I/O error during the replay: ") + e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag.rfind("--", 0) != 0 || i + 1 >= argc)
      return fail(2, "bad argument '" + flag + "'; " + kUsage);
    args[flag.substr(2)] = argv[++i];
  }
  for (const char* required : {"engine", "db"})
    if (!args.count(required)) return fail(2, std::string("missing --") + required + "; " + kUsage);
  const size_t modes = args.count("spec") + args.count("settle") + args.count("replay") + args.count("inspect-trace") +
                       args.count("digest");
  if (modes != 1) return fail(2, std::string("give one of --spec, --settle, --replay, --inspect-trace or --digest; ") + kUsage);
  const std::string engine_name = args["engine"];
  if (engine_name != "rocksdb" && engine_name != "leveldb")
    return fail(2, "--engine '" + engine_name + "' is not rocksdb or leveldb");
  if (args.count("settle")) return settle(engine_name, args);
  const bool crash_at_end = args.count("crash-at-end") && args["crash-at-end"] != "0";
  double interval_s = 1.0;
  if (args.count("interval-ms")) {
    try { interval_s = std::stod(args["interval-ms"]) / 1000.0; }
    catch (const std::exception&) { return fail(2, "--interval-ms '" + args["interval-ms"] + "' is not a number"); }
  }
  if (!args.count("spec")) {
    if (engine_name != "rocksdb") return fail(2, "traces are RocksDB's: use --engine rocksdb");
    return trace_mode(args, crash_at_end, interval_s);
  }
  kvbench::Spec spec;
  std::string error;
  if (!read_json_file(args["spec"], [&](const nlohmann::json& j) { spec = kvbench::parse_spec(j); }, &error))
    return fail(2, error);
  try {
    auto engine = engine_name == "rocksdb" ? kvbench::open_rocksdb(args["db"], spec.config, spec.write_sync,
                                                                           spec.statistics)
                                           : kvbench::open_leveldb(args["db"], spec.config, spec.write_sync);
    nlohmann::json result = kvbench::run(*engine, spec, interval_s, std::cerr);
    result["engine"] = engine_name;
    emit(result, args);
    if (crash_at_end) std::raise(SIGKILL);  // as a crash would: the store is never closed
  } catch (const kvbench::ConfigError& e) {
    return fail(e.refused ? 3 : 2, e.what());
  } catch (const kvbench::IoError& e) {
    return fail(4, std::string("I/O error during the run: ") + e.what());
  }
  return 0;
}
