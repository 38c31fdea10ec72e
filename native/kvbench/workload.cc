#include "workload.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string_view>

#include "generators.h"
#include "histogram.h"
#include "replay.h"
#include "workers.h"

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

uint64_t Zipfian::next(std::mt19937_64& rng) const {
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

uint64_t ScrambledZipfian::next(std::mt19937_64& rng, uint64_t records) const {
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
                 field<double>(mix, "rmw", 0, where), field<double>(mix, "scan_reverse", 0, where)};
    double total = phase.mix.read + phase.mix.update + phase.mix.insert + phase.mix.scan + phase.mix.rmw +
                   phase.mix.scan_reverse;
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

// The spec's "threads": a whole number from 1 to kMaxThreads (a boolean is not one), 1 when absent.
unsigned parse_threads(const nlohmann::json& json) {
  if (!json.contains("threads")) return 1;
  const nlohmann::json& threads = json.at("threads");
  if (!threads.is_number_integer() || threads.get<int64_t>() < 1 || threads.get<int64_t>() > static_cast<int64_t>(kMaxThreads))
    throw SpecError("field 'threads' is " + threads.dump() + "; give a whole number from 1 to " +
                    std::to_string(kMaxThreads));
  return threads.get<unsigned>();
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
  spec.threads = parse_threads(json);
  if (spec.key_size < 8) throw SpecError("field 'key_size' must be at least 8");
  if (spec.record_count == 0) throw SpecError("field 'record_count' must be a positive integer");
  if (!json.contains("phases") || !json["phases"].is_array() || json["phases"].empty())
    throw SpecError("field 'phases' must be a non-empty list");
  for (size_t i = 0; i < json["phases"].size(); ++i) spec.phases.push_back(parse_phase(json["phases"][i], i));
  spec.config = parse_config(json);
  spec.trace = field<std::string>(json, "trace", "", "");
  spec.trace_checkpoint = field<std::string>(json, "trace_checkpoint", "", "");
  spec.trace_from = field<std::string>(json, "trace_from", "", "");
  spec.trace_scans = field<std::string>(json, "trace_scans", "", "");
  if (spec.trace.empty() && !(spec.trace_checkpoint.empty() && spec.trace_from.empty() && spec.trace_scans.empty()))
    throw SpecError("fields 'trace_checkpoint', 'trace_from' and 'trace_scans' need a 'trace' file");
  if (!spec.trace_from.empty() && std::none_of(spec.phases.begin(), spec.phases.end(),
                                               [&](const PhaseSpec& p) { return p.name == spec.trace_from; }))
    throw SpecError("field 'trace_from' names no phase: '" + spec.trace_from + "'");
  return spec;
}

// A replay's windows: [[begin, end], ...] of query records, ascending, apart, none empty.
std::vector<std::pair<uint64_t, uint64_t>> parse_windows(const nlohmann::json& json) {
  std::vector<std::pair<uint64_t, uint64_t>> windows;
  const auto given = field<std::vector<std::vector<uint64_t>>>(json, "windows", {}, "");
  for (const auto& window : given) {
    if (window.size() != 2 || window[0] >= window[1] || (!windows.empty() && window[0] < windows.back().second))
      throw SpecError("field 'windows' must list [begin, end] ranges of records, ascending and apart, none empty; "
                      "got " + json.at("windows").dump());
    windows.emplace_back(window[0], window[1]);
  }
  return windows;
}

ReplaySpec parse_replay_spec(const nlohmann::json& json) {
  if (!json.is_object()) throw SpecError("the replay spec must be a JSON object");
  ReplaySpec spec;
  spec.trace = field<std::string>(json, "trace", "", "");
  if (spec.trace.empty()) throw SpecError("field 'trace' must name the trace file");
  spec.limit = field<uint64_t>(json, "limit", 0, "");
  spec.windows = parse_windows(json);
  spec.threads = parse_threads(json);
  spec.statistics = field<bool>(json, "statistics", false, "");
  spec.rewrite = field<bool>(json, "rewrite", false, "");
  spec.scans = field<std::string>(json, "scans", "", "");
  spec.scan_report = field<std::string>(json, "scan_report", "", "");
  if (spec.scans.empty() && !spec.scan_report.empty()) throw SpecError("field 'scan_report' needs a 'scans' file");
  const std::string pace = field<std::string>(json, "pace", "fast", "");
  if (pace != "fast" && pace != "captured") throw SpecError("field 'pace' is '" + pace + "'; use fast or captured");
  spec.paced = pace == "captured";
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

Slice slice_of(uint64_t total, unsigned t, unsigned threads) {
  const uint64_t base = total / threads, extra = total % threads;
  const uint64_t begin = t * base + std::min<uint64_t>(t, extra);
  return {begin, begin + base + (t < extra ? 1 : 0)};
}

namespace {

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

struct State {
  const Spec& spec;
  Values values;
  uint64_t records;  // keys 0..records-1 exist (after the load); inserts append
};

// What every thread of a phase reads; `stop` is set when one of them failed.
struct Shared {
  const PhaseSpec& phase;
  Engine& engine;
  const State& state;
  uint64_t seed;
  unsigned threads;
  std::atomic<bool> stop{false};
};

// readseq walks the whole store once and flush writes it out once: one thread. Every other phase runs on the
// spec's threads.
unsigned phase_threads(const PhaseSpec& phase, unsigned threads) {
  return phase.kind == "readseq" || phase.kind == "flush" ? 1 : threads;
}

uint64_t phase_count(const PhaseSpec& phase, uint64_t records) { return phase.count ? phase.count : records; }

// The record indices a fill/read/delete phase walks in sequential or shuffled order, whose threads each take
// a slice of it; empty in random order, whose threads draw their keys themselves.
std::vector<uint64_t> phase_order(const PhaseSpec& phase, uint64_t records, uint64_t seed) {
  if (phase.order == "random") return {};
  std::vector<uint64_t> keys = ordered_indices(records, phase.order == "shuffled", seed);
  keys.resize(std::min<uint64_t>(phase_count(phase, records), keys.size()));
  return keys;
}

// Thread t's part of a fill/read/delete phase: its slice of `order`, or in random order its share of the
// count, drawn with replacement from a generator of its own.
void run_point(Shared& shared, Worker& worker, unsigned t, const std::vector<uint64_t>& order) {
  const PhaseSpec& phase = shared.phase;
  const uint64_t records = shared.state.records;
  Histogram& histogram = worker.latency[phase.kind == "fill" ? "put" : phase.kind == "read" ? "get" : "delete"];
  std::string key(shared.state.spec.key_size, '0');
  auto visit = [&](uint64_t index) {
    write_key(index, &key);
    if (phase.kind == "fill") worker.timed(histogram, [&] { shared.engine.put(key, shared.state.values.at(index)); });
    else if (phase.kind == "read") worker.timed(histogram, [&] { worker.lookup(shared.engine, key); });
    else worker.timed(histogram, [&] { shared.engine.remove(key); });
  };
  if (phase.order == "random") {
    std::mt19937_64 rng(thread_seed(shared.seed, t));
    const Slice part = slice_of(phase_count(phase, records), t, shared.threads);
    for (uint64_t i = part.begin; i < part.end && !shared.stop; ++i) visit(rng() % records);
  } else {
    const Slice part = slice_of(order.size(), t, shared.threads);
    for (uint64_t i = part.begin; i < part.end && !shared.stop; ++i) visit(order[i]);
  }
}

// What a mix phase's threads share to draw keys: the generators built once per phase (the scrambled zipfian's
// zeta is costly for a constant other than 0.99; the latest one is copied by each thread, which grows its own)
// and the inserted records.
struct MixKeys {
  MixKeys(const PhaseSpec& phase, uint64_t records)
      : scrambled(phase.zipfian_constant), latest(std::max<uint64_t>(records, 2), phase.zipfian_constant),
        inserts(records) {}
  const ScrambledZipfian scrambled;
  const Zipfian latest;
  Inserts inserts;
};

// Draws the record of a mix operation by the phase's distribution, among the records already published: a
// read never looks for a key whose insert has not returned yet. One per thread.
class KeyChooser {
 public:
  KeyChooser(const PhaseSpec& phase, const MixKeys& keys) : phase_(phase), keys_(keys), latest_(keys.latest) {}

  uint64_t next(std::mt19937_64& rng) {
    const uint64_t records = keys_.inserts.published();
    if (phase_.distribution == "zipfian") return keys_.scrambled.next(rng, records);
    if (phase_.distribution == "latest") {
      if (latest_.items() < records) latest_.grow(records);
      return records - 1 - std::min(latest_.next(rng), records - 1);
    }
    return rng() % records;
  }

 private:
  const PhaseSpec& phase_;
  const MixKeys& keys_;
  Zipfian latest_;
};

// Thread t's share of a mix phase's operations, each drawn by the mix's proportions from its own generator.
void run_mix(Shared& shared, Worker& worker, unsigned t, MixKeys& keys) {
  const PhaseSpec& phase = shared.phase;
  const Mix& m = phase.mix;
  const double total = m.read + m.update + m.insert + m.scan + m.rmw + m.scan_reverse;
  Engine& engine = shared.engine;
  const Values& values = shared.state.values;
  std::mt19937_64 rng(thread_seed(shared.seed, t));
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  KeyChooser choose(phase, keys);
  Histogram *read = nullptr, *update = nullptr, *insert = nullptr, *scan = nullptr, *rmw = nullptr,
            *scan_reverse = nullptr;
  auto histogram = [&](Histogram*& slot, const char* name) -> Histogram& {
    if (!slot) slot = &worker.latency[name];  // created on first use: only the ops that ran appear in the result
    return *slot;
  };
  std::string key(shared.state.spec.key_size, '0');
  const Slice part = slice_of(phase.count, t, shared.threads);
  for (uint64_t i = part.begin; i < part.end && !shared.stop; ++i) {  // i: the operation's number in the phase
    double pick = unit(rng) * total;
    if ((pick -= m.read) < 0) {
      write_key(choose.next(rng), &key);
      worker.timed(histogram(read, "read"), [&] { worker.lookup(engine, key); });
    } else if ((pick -= m.update) < 0) {
      uint64_t index = choose.next(rng);
      write_key(index, &key);
      worker.timed(histogram(update, "update"), [&] { engine.put(key, values.at(index + i)); });
    } else if ((pick -= m.insert) < 0) {
      uint64_t index = keys.inserts.claim();
      write_key(index, &key);
      worker.timed(histogram(insert, "insert"), [&] { engine.put(key, values.at(index)); });
      keys.inserts.written(index);
      ++worker.inserted;
    } else if ((pick -= m.scan) < 0) {
      write_key(choose.next(rng), &key);
      uint64_t length = phase.scan_length_min + rng() % (phase.scan_length_max - phase.scan_length_min + 1);
      worker.timed(histogram(scan, "scan"), [&] { worker.keys_seen += engine.scan(key, length); });
    } else if ((pick -= m.scan_reverse) < 0) {
      write_key(choose.next(rng), &key);
      uint64_t length = phase.scan_length_min + rng() % (phase.scan_length_max - phase.scan_length_min + 1);
      worker.timed(histogram(scan_reverse, "scan_reverse"),
                   [&] { worker.keys_seen += engine.scan_reverse(key, length); });
    } else {
      uint64_t index = choose.next(rng);
      write_key(index, &key);
      worker.timed(histogram(rmw, "rmw"), [&] { worker.lookup(engine, key); engine.put(key, values.at(index + i)); });
    }
  }
}

// What a phase's threads (or a run's phases) did, summed; latency histograms merged per operation.
struct Totals {
  uint64_t ops = 0, found = 0, not_found = 0, keys_seen = 0, inserted = 0;
  std::map<std::string, Histogram> latency;

  // A Worker (its ops an atomic, read once its thread has ended) or the Totals of a phase.
  template <typename Part>
  void add(const Part& part) {
    ops += part.ops;
    found += part.found;
    not_found += part.not_found;
    keys_seen += part.keys_seen;
    inserted += part.inserted;
    for (const auto& [op, h] : part.latency) latency[op].merge(h);
  }
};

// Runs one phase on its threads and sums what they did; after a mix, `state.records` counts its inserts.
Totals run_phase(Engine& engine, State& state, const PhaseSpec& phase, uint64_t seed, const Progress& progress) {
  Shared shared{phase, engine, state, seed, phase_threads(phase, state.spec.threads)};
  std::function<void(Worker&, unsigned)> work;
  std::vector<uint64_t> order;
  std::unique_ptr<MixKeys> mix_keys;
  if (phase.kind == "mix") {
    mix_keys = std::make_unique<MixKeys>(phase, state.records);
    work = [&](Worker& worker, unsigned t) { run_mix(shared, worker, t, *mix_keys); };
  } else if (phase.kind == "readseq") {
    work = [&](Worker& worker, unsigned) {
      worker.timed(worker.latency["scan"], [&] { worker.keys_seen = engine.scan("", 0); });
    };
  } else if (phase.kind == "flush") {
    work = [&](Worker& worker, unsigned) { worker.timed(worker.latency["flush"], [&] { engine.flush(); }); };
  } else {
    order = phase_order(phase, state.records, seed);
    work = [&](Worker& worker, unsigned t) { run_point(shared, worker, t, order); };
  }
  Totals totals;
  for (const Worker& worker : run_on_threads(shared.threads, work, shared.stop, progress)) totals.add(worker);
  if (mix_keys) state.records = mix_keys->inserts.published();  // every thread has ended: all inserts published
  return totals;
}

nlohmann::json latency_of(const Totals& totals) {
  nlohmann::json latency = nlohmann::json::object();
  for (const auto& [op, h] : totals.latency) latency[op] = summarize(h);
  return latency;
}

// Every kind of operation in one histogram: what the phase's percentiles are (a mix's reads and updates together).
nlohmann::json latency_of_all(const Totals& totals) {
  Histogram merged;
  for (const auto& [op, h] : totals.latency) merged.merge(h);
  return summarize(merged);
}

}  // namespace

nlohmann::json run(Engine& engine, const Spec& spec, double interval_s, std::ostream& progress) {
  State state{spec, Values(spec.value_size, spec.seed), spec.record_count};
  nlohmann::json phases = nlohmann::json::array();
  Totals all;
  const auto start = Clock::now();
  bool tracing = false;
  for (size_t p = 0; p < spec.phases.size(); ++p) {
    const PhaseSpec& phase = spec.phases[p];
    if (!spec.trace.empty() && !tracing && (spec.trace_from.empty() || phase.name == spec.trace_from)) {
      engine.start_trace(spec.trace, spec.trace_checkpoint, spec.trace_scans);
      tracing = true;
    }
    const uint64_t seed = spec.seed * 1000003 + p;  // each phase its own order
    const auto phase_start = Clock::now();
    const Totals totals = run_phase(engine, state, phase, seed, {progress, phase.name, interval_s, phase_start});
    const double elapsed = seconds(Clock::now() - phase_start);  // wall time: ops/s counts every thread's operations
    phases.push_back({{"name", phase.name}, {"kind", phase.kind}, {"threads", phase_threads(phase, spec.threads)},
                      {"ops", totals.ops}, {"elapsed_s", elapsed}, {"ops_per_s", elapsed > 0 ? totals.ops / elapsed : 0.0},
                      {"found", totals.found}, {"not_found", totals.not_found}, {"errors", 0},
                      {"keys_seen", totals.keys_seen}, {"inserted", totals.inserted}, {"latency_us", latency_of(totals)},
                      {"latency_all_us", latency_of_all(totals)}});
    all.add(totals);
  }
  if (tracing) engine.end_trace();
  const double elapsed = seconds(Clock::now() - start);
  nlohmann::json result = {
      {"engine_version", engine.version()}, {"seed", spec.seed}, {"threads", spec.threads},
      {"elapsed_s", elapsed}, {"ops", all.ops}, {"ops_per_s", elapsed > 0 ? all.ops / elapsed : 0.0},
      {"phases", phases}, {"latency_us", latency_of(all)},
      {"counts", {{"found", all.found}, {"not_found", all.not_found}, {"errors", 0}, {"inserted", all.inserted}}},
      {"stats", engine.stats()}};
  if (nlohmann::json opened = engine.options(); !opened.empty()) result["options"] = opened;
  return result;
}

}  // namespace kvbench
