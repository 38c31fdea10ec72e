#include "workload.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <string_view>

#include "generators.h"
#include "histogram.h"

namespace kvbench {

// ------------------------------------------------------------------ generators

std::vector<uint64_t> ordered_indices(uint64_t n, bool shuffled, uint64_t seed) {
  std::vector<uint64_t> order(n);
  for (uint64_t i = 0; i < n; ++i) order[i] = i;
  if (shuffled) {
    std::mt19937_64 rng(seed);
    for (uint64_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
  }
  return order;
}

double zeta(uint64_t n, double theta) {
  double sum = 0;
  for (uint64_t i = 1; i <= n; ++i) sum += 1.0 / std::pow(static_cast<double>(i), theta);
  return sum;
}

Zipfian::Zipfian(uint64_t items, double theta, double zetan)
    : items_(items), theta_(theta), zetan_(zetan < 0 ? zeta(items, theta) : zetan), zeta2_(zeta(2, theta)) {
  recompute();
}

void Zipfian::recompute() {
  alpha_ = 1.0 / (1.0 - theta_);
  eta_ = (1 - std::pow(2.0 / static_cast<double>(items_), 1 - theta_)) / (1 - zeta2_ / zetan_);
}

void Zipfian::grow(uint64_t items) {
  for (uint64_t i = items_ + 1; i <= items; ++i) zetan_ += 1.0 / std::pow(static_cast<double>(i), theta_);
  if (items != items_) { items_ = items; recompute(); }
}

uint64_t Zipfian::next(std::mt19937_64& rng) {
  double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  double uz = u * zetan_;
  if (uz < 1.0) return 0;
  if (uz < 1.0 + std::pow(0.5, theta_)) return 1;
  uint64_t value = static_cast<uint64_t>(static_cast<double>(items_) * std::pow(eta_ * u - eta_ + 1, alpha_));
  return std::min(value, items_ - 1);
}

// YCSB: ZipfianGenerator.ZIPFIAN_CONSTANT 0.99 over ITEM_COUNT 10^10 items, whose zeta YCSB precomputes.
ScrambledZipfian::ScrambledZipfian(double theta)
    : zipf_(10000000000ULL, theta, theta == 0.99 ? 26.46902820178302 : zeta(10000000, theta)) {}

uint64_t ScrambledZipfian::next(std::mt19937_64& rng, uint64_t records) {
  return fnv64(zipf_.next(rng)) % records;
}

// ------------------------------------------------------------------ spec

namespace {

template <typename T>
T field(const nlohmann::json& json, const char* name, T fallback, const std::string& where) {
  if (!json.contains(name)) return fallback;
  try {
    return json.at(name).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw SpecError(where + "field '" + name + "' has the wrong type: " + json.at(name).dump());
  }
}

PhaseSpec parse_phase(const nlohmann::json& json, size_t index) {
  std::string where = "phases[" + std::to_string(index) + "]: ";
  PhaseSpec phase;
  phase.kind = field<std::string>(json, "kind", "", where);
  phase.name = field<std::string>(json, "name", phase.kind, where);
  phase.order = field<std::string>(json, "order", phase.order, where);
  phase.count = field<uint64_t>(json, "count", 0, where);
  phase.distribution = field<std::string>(json, "distribution", phase.distribution, where);
  phase.zipfian_constant = field<double>(json, "zipfian_constant", phase.zipfian_constant, where);
  phase.scan_length_min = field<uint64_t>(json, "scan_length_min", phase.scan_length_min, where);
  phase.scan_length_max = field<uint64_t>(json, "scan_length_max", phase.scan_length_max, where);
  static const std::vector<std::string> kinds{"fill", "read", "delete", "readseq", "mix", "flush"};
  if (std::find(kinds.begin(), kinds.end(), phase.kind) == kinds.end())
    throw SpecError(where + "field 'kind' is '" + phase.kind + "'; use fill, read, delete, readseq, mix or flush");
  if (phase.order != "sequential" && phase.order != "shuffled" && phase.order != "random")
    throw SpecError(where + "field 'order' is '" + phase.order + "'; use sequential, shuffled or random");
  if (phase.kind == "mix") {
    const nlohmann::json mix = json.value("mix", nlohmann::json::object());
    phase.mix = {field<double>(mix, "read", 0, where), field<double>(mix, "update", 0, where),
                 field<double>(mix, "insert", 0, where), field<double>(mix, "scan", 0, where),
                 field<double>(mix, "rmw", 0, where)};
    double total = phase.mix.read + phase.mix.update + phase.mix.insert + phase.mix.scan + phase.mix.rmw;
    if (total <= 0) throw SpecError(where + "field 'mix' has no operation; give e.g. {\"read\": 0.5, \"update\": 0.5}");
    if (phase.distribution != "uniform" && phase.distribution != "zipfian" && phase.distribution != "latest")
      throw SpecError(where + "field 'distribution' is '" + phase.distribution + "'; use uniform, zipfian or latest");
    if (phase.count == 0) throw SpecError(where + "field 'count' is required for a mix phase");
    if (phase.scan_length_min < 1 || phase.scan_length_max < phase.scan_length_min)
      throw SpecError(where + "scan lengths must satisfy 1 <= scan_length_min <= scan_length_max");
  }
  return phase;
}

Config parse_config(const nlohmann::json& json) {
  const nlohmann::json config = json.value("config", nlohmann::json::object());
  if (!config.is_object()) throw SpecError("field 'config' must be an object of option name -> string value");
  Config parsed;
  for (const auto& [key, value] : config.items()) {
    if (!value.is_string()) throw SpecError("config '" + key + "' must be a string, got " + value.dump());
    parsed[key] = value.get<std::string>();
  }
  return parsed;
}

}  // namespace

Spec parse_spec(const nlohmann::json& json) {
  if (!json.is_object()) throw SpecError("the spec must be a JSON object");
  Spec spec;
  spec.seed = field<uint64_t>(json, "seed", spec.seed, "");
  spec.key_size = field<uint64_t>(json, "key_size", spec.key_size, "");
  spec.value_size = field<uint64_t>(json, "value_size", spec.value_size, "");
  spec.record_count = field<uint64_t>(json, "record_count", 0, "");
  spec.write_sync = field<bool>(json, "write_sync", false, "");
  spec.statistics = field<bool>(json, "statistics", false, "");
  if (spec.key_size < 8) throw SpecError("field 'key_size' must be at least 8");
  if (spec.record_count == 0) throw SpecError("field 'record_count' must be a positive integer");
  if (!json.contains("phases") || !json["phases"].is_array() || json["phases"].empty())
    throw SpecError("field 'phases' must be a non-empty list");
  for (size_t i = 0; i < json["phases"].size(); ++i) spec.phases.push_back(parse_phase(json["phases"][i], i));
  spec.config = parse_config(json);
  return spec;
}

SettleSpec parse_settle_spec(const nlohmann::json& json) {
  if (!json.is_object()) throw SpecError("the settle spec must be a JSON object");
  SettleSpec spec;
  spec.key_size = field<uint64_t>(json, "key_size", spec.key_size, "");
  spec.record_count = field<uint64_t>(json, "record_count", 0, "");
  spec.probe_keys = field<uint64_t>(json, "probe_keys", spec.probe_keys, "");
  spec.seed = field<uint64_t>(json, "seed", spec.seed, "");
  spec.key_format = field<std::string>(json, "key_format", spec.key_format, "");
  spec.compaction_limit_s = field<double>(json, "compaction_limit_s", spec.compaction_limit_s, "");
  if (spec.key_size < 8) throw SpecError("field 'key_size' must be at least 8");
  if (spec.record_count == 0) throw SpecError("field 'record_count' must be a positive integer");
  if (spec.key_format != "kvbench" && spec.key_format != "db_bench")
    throw SpecError("field 'key_format' is '" + spec.key_format + "'; use kvbench or db_bench");
  if (spec.compaction_limit_s < 0) throw SpecError("field 'compaction_limit_s' must not be negative");
  spec.config = parse_config(json);
  return spec;
}

// ------------------------------------------------------------------ running

namespace {

using Clock = std::chrono::steady_clock;

class Values {
 public:
  Values(uint64_t value_size, uint64_t seed) : size_(value_size) {
    std::mt19937_64 rng(seed ^ 0x5eed);
    buffer_.resize(std::max<uint64_t>(1 << 20, 4 * value_size));
    for (size_t i = 0; i < buffer_.size(); ++i)  // half random, half repeated: compresses to about 50%
      buffer_[i] = (i % 64) < 32 ? static_cast<char>('a' + rng() % 26) : 'x';
  }
  std::string_view at(uint64_t index) const {
    return std::string_view(buffer_).substr((index * 131) % (buffer_.size() - size_), size_);
  }

 private:
  uint64_t size_;
  std::string buffer_;
};

struct PhaseRun {
  const PhaseSpec& spec;
  Engine& engine;
  std::ostream& progress;
  double interval_s;
  uint64_t ops = 0, found = 0, not_found = 0, keys_seen = 0, inserted = 0;
  std::map<std::string, Histogram> latency;
  Clock::time_point start = Clock::now(), last_report = start;
  uint64_t ops_at_last_report = 0;

  template <typename F>
  void timed(Histogram& histogram, F&& body) {
    auto begin = Clock::now();
    body();
    auto end = Clock::now();
    histogram.add(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(end - begin).count()));
    if ((++ops & 1023) == 0 && std::chrono::duration<double>(end - last_report).count() >= interval_s) report(end);
  }

  void report(Clock::time_point now) {
    double window = std::chrono::duration<double>(now - last_report).count();
    progress << nlohmann::json{{"interval_s", std::chrono::duration<double>(now - start).count()},
                               {"phase", spec.name}, {"ops", ops},
                               {"ops_per_s", window > 0 ? (ops - ops_at_last_report) / window : 0.0}}.dump()
             << std::endl;
    last_report = now;
    ops_at_last_report = ops;
  }

  Histogram& op(const char* name) { return latency[name]; }

  void lookup(std::string_view key) {
    if (engine.get(key) == Lookup::kFound) ++found; else ++not_found;
  }

  nlohmann::json result() const {
    double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    nlohmann::json lat = nlohmann::json::object();
    for (const auto& [op, h] : latency) lat[op] = summarize(h);
    return {{"name", spec.name}, {"kind", spec.kind}, {"ops", ops}, {"elapsed_s", elapsed},
            {"ops_per_s", elapsed > 0 ? ops / elapsed : 0.0}, {"found", found}, {"not_found", not_found},
            {"errors", 0}, {"keys_seen", keys_seen}, {"inserted", inserted}, {"latency_us", lat}};
  }

  static nlohmann::json summarize(const Histogram& h) {
    return {{"count", h.count()}, {"p50", h.percentile_us(0.50)}, {"p95", h.percentile_us(0.95)},
            {"p99", h.percentile_us(0.99)}, {"p99.9", h.percentile_us(0.999)}, {"max", h.max_us()},
            {"mean", h.mean_us()}};
  }
};

struct State {
  const Spec& spec;
  Values values;
  uint64_t records;  // keys 0..records-1 exist (after the load); inserts append
};

std::vector<uint64_t> phase_keys(const PhaseSpec& phase, uint64_t records, uint64_t seed) {
  uint64_t count = phase.count ? phase.count : records;
  if (phase.order == "random") {
    std::mt19937_64 rng(seed);
    std::vector<uint64_t> keys(count);
    for (auto& k : keys) k = rng() % records;
    return keys;
  }
  std::vector<uint64_t> keys = ordered_indices(records, phase.order == "shuffled", seed);
  keys.resize(std::min<uint64_t>(count, keys.size()));
  return keys;
}

void run_mix(PhaseRun& run, State& state, uint64_t seed) {
  const PhaseSpec& phase = run.spec;
  const Mix& m = phase.mix;
  double total = m.read + m.update + m.insert + m.scan + m.rmw;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  ScrambledZipfian scrambled(phase.zipfian_constant);
  Zipfian latest(std::max<uint64_t>(state.records, 2), phase.zipfian_constant);
  auto choose = [&]() -> uint64_t {
    if (phase.distribution == "zipfian") return scrambled.next(rng, state.records);
    if (phase.distribution == "latest") return state.records - 1 - std::min(latest.next(rng), state.records - 1);
    return rng() % state.records;
  };
  Histogram *read = nullptr, *update = nullptr, *insert = nullptr, *scan = nullptr, *rmw = nullptr;
  auto histogram = [&](Histogram*& slot, const char* name) -> Histogram& {
    if (!slot) slot = &run.op(name);  // created on first use: only the ops that ran appear in the result
    return *slot;
  };
  std::string key(state.spec.key_size, '0');
  for (uint64_t i = 0; i < phase.count; ++i) {
    double pick = unit(rng) * total;
    if ((pick -= m.read) < 0) {
      write_key(choose(), &key);
      run.timed(histogram(read, "read"), [&] { run.lookup(key); });
    } else if ((pick -= m.update) < 0) {
      uint64_t index = choose();
      write_key(index, &key);
      run.timed(histogram(update, "update"), [&] { run.engine.put(key, state.values.at(index + i)); });
    } else if ((pick -= m.insert) < 0) {
      uint64_t index = state.records;
      write_key(index, &key);
      run.timed(histogram(insert, "insert"), [&] { run.engine.put(key, state.values.at(index)); });
      ++state.records;
      ++run.inserted;
      if (phase.distribution == "latest") latest.grow(state.records);
    } else if ((pick -= m.scan) < 0) {
      write_key(choose(), &key);
      uint64_t length = phase.scan_length_min + rng() % (phase.scan_length_max - phase.scan_length_min + 1);
      run.timed(histogram(scan, "scan"), [&] { run.keys_seen += run.engine.scan(key, length); });
    } else {
      uint64_t index = choose();
      write_key(index, &key);
      run.timed(histogram(rmw, "rmw"), [&] { run.lookup(key); run.engine.put(key, state.values.at(index + i)); });
    }
  }
}

}  // namespace

nlohmann::json run(Engine& engine, const Spec& spec, double interval_s, std::ostream& progress) {
  State state{spec, Values(spec.value_size, spec.seed), spec.record_count};
  nlohmann::json phases = nlohmann::json::array();
  std::map<std::string, Histogram> all;
  uint64_t total_ops = 0, found = 0, not_found = 0, inserted = 0;
  auto start = Clock::now();
  for (size_t p = 0; p < spec.phases.size(); ++p) {
    const PhaseSpec& phase = spec.phases[p];
    uint64_t seed = spec.seed * 1000003 + p;  // each phase its own order
    PhaseRun run{phase, engine, progress, interval_s, 0, 0, 0, 0, 0, {}, Clock::now(), Clock::now(), 0};
    if (phase.kind == "mix") {
      run_mix(run, state, seed);
    } else if (phase.kind == "readseq") {
      run.timed(run.op("scan"), [&] { run.keys_seen = engine.scan("", 0); });
    } else if (phase.kind == "flush") {
      run.timed(run.op("flush"), [&] { engine.flush(); });
    } else {
      std::string key(spec.key_size, '0');
      const char* name = phase.kind == "fill" ? "put" : phase.kind == "read" ? "get" : "delete";
      Histogram& histogram = run.op(name);
      for (uint64_t index : phase_keys(phase, state.records, seed)) {
        write_key(index, &key);
        if (phase.kind == "fill") run.timed(histogram, [&] { engine.put(key, state.values.at(index)); });
        else if (phase.kind == "read") run.timed(histogram, [&] { run.lookup(key); });
        else run.timed(histogram, [&] { engine.remove(key); });
      }
    }
    phases.push_back(run.result());
    total_ops += run.ops; found += run.found; not_found += run.not_found; inserted += run.inserted;
    for (auto& [op, h] : run.latency) all[op].merge(h);
  }
  double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  nlohmann::json latency = nlohmann::json::object();
  for (const auto& [op, h] : all) latency[op] = PhaseRun::summarize(h);
  return {{"engine_version", engine.version()}, {"seed", spec.seed}, {"elapsed_s", elapsed}, {"ops", total_ops},
          {"ops_per_s", elapsed > 0 ? total_ops / elapsed : 0.0}, {"phases", phases}, {"latency_us", latency},
          {"counts", {{"found", found}, {"not_found", not_found}, {"errors", 0}, {"inserted", inserted}}},
          {"stats", engine.stats()}};
}

}  // namespace kvbench
