#include "settle.h"

#include <cstdio>
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

nlohmann::json settle_result(const SettleReport& r) {
  std::string reason;
  if (!r.settled) {
    char text[160];
    std::snprintf(text, sizeof(text), "compaction still pending after %.1f s (L0 files: %llu)", r.gave_up_after_s,
                  static_cast<unsigned long long>(r.files_by_level.empty() ? 0 : r.files_by_level[0]));
    reason = text;
  }
  return {{"settled", r.settled}, {"reason", reason}, {"open_s", r.open_s}, {"probe_s", r.probe_s},
          {"recovery_s", r.open_s + r.probe_s}, {"flush_s", r.flush_s}, {"compaction_s", r.compaction_s},
          {"settle_s", r.open_s + r.probe_s + r.flush_s + r.compaction_s}, {"close_s", r.close_s},
          {"probe_found", r.found}, {"probe_not_found", r.not_found}, {"reshaped", r.reshaped},
          {"original", r.original}, {"files_by_level", r.files_by_level}, {"sst_bytes", r.sst_bytes},
          {"wal_bytes_at_open", r.wal_bytes_at_open}, {"engine_version", r.engine_version}};
}

}  // namespace kvbench
