#include "settle.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "generators.h"

namespace kvbench {

namespace {

bool ends_with(const std::string& name, const std::string& suffix) {
  return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

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
      if (ends_with(name, suffix))
        total += entry.file_size(ignored);
  }
  return total;
}

void require_store(const std::string& dir) {
  if (!std::filesystem::exists(std::filesystem::path(dir) / "CURRENT"))
    throw NoStoreError("no store to settle at '" + dir + "' (no CURRENT file); run a workload there first");
}

bool UnlistedTables::being_written(const std::set<uint64_t>& listed) {
  const auto now = SettleClock::now();
  std::map<std::string, Seen> seen;
  bool growing = false;
  std::error_code ignored;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ignored)) {
    const std::string name = entry.path().filename().string();
    if (name.size() == suffix_.size() || !ends_with(name, suffix_) ||
        listed.count(std::strtoull(name.c_str(), nullptr, 10)))
      continue;
    const uint64_t size = entry.file_size(ignored);
    auto before = seen_.find(name);
    const Seen now_seen = before != seen_.end() && before->second.size == size ? before->second : Seen{size, now};
    growing = growing || std::chrono::duration<double>(now - now_seen.since).count() < leftover_s_;
    seen[name] = now_seen;
  }
  seen_ = std::move(seen);
  return growing;
}

std::vector<std::string> UnlistedTables::left_behind() const {
  std::vector<std::string> names;
  for (const auto& [name, seen] : seen_)
    if (seconds_since(seen.since) >= leftover_s_) names.push_back(name);
  return names;
}

std::vector<std::string> UnlistedTables::unlisted() const {
  std::vector<std::string> names;
  for (const auto& entry : seen_) names.push_back(entry.first);
  return names;
}

std::vector<std::string> error_lines(const std::string& log_path) {
  std::vector<std::string> found;
  std::ifstream log(log_path);
  for (std::string line; std::getline(log, line);) {
    std::string lower = line;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    // "Compaction error: ...", not the recovery's "(ignoring error) ...: dropping N bytes" of a log a crash cut
    if (lower.find("error:") != std::string::npos) found.push_back(line);
  }
  return found;
}

nlohmann::json settle_result(const SettleReport& r) {
  std::string reason;
  if (!r.engine_errors.empty()) {
    reason = "the engine stopped compacting after an error of its own: " + r.engine_errors.front();
  } else if (!r.settled) {
    char text[160];
    std::snprintf(text, sizeof(text), "compaction still pending after %.1f s (L0 files: %llu)", r.gave_up_after_s,
                  static_cast<unsigned long long>(r.files_by_level.empty() ? 0 : r.files_by_level[0]));
    reason = text;
  }
  return {{"settled", r.settled}, {"reason", reason}, {"open_s", r.open_s}, {"probe_s", r.probe_s},
          {"recovery_s", r.open_s + r.probe_s}, {"flush_s", r.flush_s}, {"compaction_s", r.compaction_s},
          {"settle_s", r.open_s + r.probe_s + r.flush_s + r.compaction_s}, {"close_s", r.close_s},
          {"probe_found", r.found}, {"probe_not_found", r.not_found}, {"reshaped", r.reshaped},
          {"original", r.original}, {"files_by_level", r.files_by_level}, {"left_behind", r.left_behind},
          {"engine_errors", r.engine_errors}, {"sst_bytes", r.sst_bytes},
          {"wal_bytes_at_open", r.wal_bytes_at_open}, {"engine_version", r.engine_version}};
}

}  // namespace kvbench
