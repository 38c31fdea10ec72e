#include "settle.h"

#include <filesystem>
#include <random>

#include "generators.h"

namespace kvbench {

std::vector<std::string> probe_keys(const SettleSpec& spec) {
  std::mt19937_64 rng(spec.seed ^ 0x9e3779b97f4a7c15ULL);
  std::vector<std::string> keys;
  keys.reserve(spec.probe_keys);
  for (uint64_t i = 0; i < spec.probe_keys; ++i) {
    uint64_t index = rng() % spec.record_count;
    keys.push_back(spec.key_format == "db_bench" ? db_bench_key(index, spec.key_size) : make_key(index, spec.key_size));
  }
  return keys;
}

uint64_t bytes_of_files(const std::string& dir, const std::vector<std::string>& suffixes) {
  uint64_t total = 0;
  std::error_code ignored;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ignored)) {
    const std::string name = entry.path().filename().string();
    for (const auto& suffix : suffixes)
      if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
        total += entry.file_size(ignored);
  }
  return total;
}

void require_store(const std::string& dir) {
  if (!std::filesystem::exists(std::filesystem::path(dir) / "CURRENT"))
    throw NoStoreError("no store to settle at '" + dir + "' (no CURRENT file); run a workload there first");
}

nlohmann::json settle_result(const SettleTimes& t, bool settled, const std::string& reason) {
  return {{"settled", settled}, {"reason", reason}, {"open_s", t.open_s}, {"probe_s", t.probe_s},
          {"recovery_s", t.open_s + t.probe_s}, {"flush_s", t.flush_s}, {"compaction_s", t.compaction_s},
          {"settle_s", t.open_s + t.probe_s + t.flush_s + t.compaction_s}, {"close_s", t.close_s},
          {"probe_found", t.found}, {"probe_not_found", t.not_found}};
}

}  // namespace kvbench
