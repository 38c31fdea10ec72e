// kvbench: run one workload under one config on RocksDB or LevelDB and print one JSON result.
//   kvbench --engine rocksdb|leveldb --db DIR --spec SPEC.json [--result OUT.json] [--interval-ms 1000]
// Exit codes: 0 ok; 2 bad input (args, spec, unknown option, bad value); 3 the store refused the config;
// 4 I/O error during the run. Errors are one line on stderr starting "kvbench: error:".
#include <fstream>
#include <iostream>
#include <map>
#include <string>

#include "engine.h"
#include "workload.h"

namespace {

int fail(int code, const std::string& message) {
  std::cerr << "kvbench: error: " << message << std::endl;
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag.rfind("--", 0) != 0 || i + 1 >= argc)
      return fail(2, "bad argument '" + flag + "'; usage: kvbench --engine rocksdb|leveldb --db DIR --spec SPEC.json "
                     "[--result OUT.json] [--interval-ms N]");
    args[flag.substr(2)] = argv[++i];
  }
  for (const char* required : {"engine", "db", "spec"})
    if (!args.count(required)) return fail(2, std::string("missing --") + required);
  const std::string engine_name = args["engine"];
  if (engine_name != "rocksdb" && engine_name != "leveldb")
    return fail(2, "--engine '" + engine_name + "' is not rocksdb or leveldb");
  double interval_s = 1.0;
  if (args.count("interval-ms")) {
    try { interval_s = std::stod(args["interval-ms"]) / 1000.0; }
    catch (const std::exception&) { return fail(2, "--interval-ms '" + args["interval-ms"] + "' is not a number"); }
  }
  std::ifstream spec_file(args["spec"]);
  if (!spec_file) return fail(2, "cannot read the spec file '" + args["spec"] + "'");
  kvbench::Spec spec;
  try {
    spec = kvbench::parse_spec(nlohmann::json::parse(spec_file));
  } catch (const nlohmann::json::parse_error& e) {
    return fail(2, "spec '" + args["spec"] + "' is not valid JSON at byte " + std::to_string(e.byte) + ": " + e.what());
  } catch (const kvbench::SpecError& e) {
    return fail(2, "spec '" + args["spec"] + "': " + e.what());
  }
  try {
    auto engine = engine_name == "rocksdb" ? kvbench::open_rocksdb(args["db"], spec.config, spec.write_sync)
                                           : kvbench::open_leveldb(args["db"], spec.config, spec.write_sync);
    nlohmann::json result = kvbench::run(*engine, spec, interval_s, std::cerr);
    result["engine"] = engine_name;
    const std::string text = result.dump(2);
    std::cout << text << std::endl;
    if (args.count("result")) std::ofstream(args["result"]) << text << std::endl;
  } catch (const kvbench::ConfigError& e) {
    return fail(e.refused ? 3 : 2, e.what());
  } catch (const kvbench::IoError& e) {
    return fail(4, std::string("I/O error during the run: ") + e.what());
  }
  return 0;
}
