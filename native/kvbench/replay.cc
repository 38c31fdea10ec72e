#include "replay.h"

#include <rocksdb/db.h>
#include <rocksdb/trace_record.h>
#include <rocksdb/trace_record_result.h>
#include <rocksdb/utilities/replayer.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "engine_rocksdb.h"
#include "histogram.h"
#include "scan_lengths.h"
#include "trace_records.h"

namespace kvbench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_of(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
uint64_t nanos_of(Clock::duration d) {
  return static_cast<uint64_t>(std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::nanoseconds>(d).count()));
}

// What the replay threads measured, each its own, merged at the end.
struct Tally {
  std::map<std::string, Histogram> latency;  // by record kind
  Histogram lag;  // paced: how late each record started against the captured schedule
  uint64_t errors = 0;
  std::string first_error;
  // With scan lengths: the Next and Prev calls replayed after seeks, and the scans whose end differed from the
  // application's (its iterator ran out before the recorded steps; or it had run out and the replay's had not).
  uint64_t next = 0, prev = 0, cut_short = 0, ran_on = 0;

  void error(const char* kind, const rocksdb::Status& s) {
    if (errors++ == 0) first_error = std::string(kind) + ": " + s.ToString();
  }
};

struct Job {
  std::unique_ptr<rocksdb::TraceRecord> record;
  Clock::time_point due;
  bool scan = false;  // a seek the replay runs itself, then its recorded steps (scan lengths given)
  ScanSteps steps;
  uint64_t seek = 0;  // the seek's number in the trace (from 0), for the scan report
};

// One replayed seek, as the scan report gives it.
struct Reported {
  uint64_t seek;
  uint32_t cf;
  bool for_prev;
  ScanSteps steps;
  uint64_t next, prev;
};

// Step `it` up to `count` times by `step` while it stays valid, reading each key and value as an application would;
// the steps taken.
template <typename Step>
uint64_t step_on(rocksdb::Iterator* it, uint64_t count, Step step, uint64_t* bytes) {
  uint64_t taken = 0;
  for (; taken < count && it->Valid(); ++taken) {
    step(it);
    if (it->Valid()) *bytes += it->key().size() + it->value().size();
  }
  return taken;
}

// One replay thread's queue: records in the order they were read; the reader waits when it is full.
class Lane {
 public:
  void push(Job job) {
    std::unique_lock<std::mutex> lock(mutex_);
    room_.wait(lock, [&] { return queue_.size() < kDepth; });
    queue_.push_back(std::move(job));
    ready_.notify_one();
  }
  bool pop(Job* job) {
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait(lock, [&] { return !queue_.empty() || closed_; });
    if (queue_.empty()) return false;
    *job = std::move(queue_.front());
    queue_.pop_front();
    room_.notify_one();
    return true;
  }
  void close() {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    ready_.notify_all();
  }

 private:
  static constexpr size_t kDepth = 4096;
  std::mutex mutex_;
  std::condition_variable ready_, room_;
  std::deque<Job> queue_;
  bool closed_ = false;
};

class Replay {
 public:
  Replay(rocksdb::Replayer& replayer, const ReplaySpec& spec, rocksdb::DB* db,
         const std::vector<rocksdb::ColumnFamilyHandle*>& cfs)
      : replayer_(replayer), spec_(spec), db_(db) {
    for (auto* cf : cfs) cfs_[cf->GetID()] = cf;
  }

  // Run one record, timing it (and its lateness, paced).
  void execute(const Job& job, Tally& tally) {
    const auto begin = Clock::now();
    if (spec_.paced) tally.lag.add(nanos_of(begin - job.due));
    const char* kind = kind_of(job.record->GetTraceType());
    rocksdb::Status s;
    if (job.scan) {
      s = scan(static_cast<const rocksdb::IteratorSeekQueryTraceRecord&>(*job.record), job.steps, job.seek, tally);
    } else {
      std::unique_ptr<rocksdb::TraceRecordResult> result;
      s = replayer_.Execute(job.record, &result);
    }
    tally.latency[kind].add(nanos_of(Clock::now() - begin));
    if (!s.ok()) tally.error(kind, s);
    done_.fetch_add(1, std::memory_order_relaxed);
  }

  uint64_t done() const { return done_.load(std::memory_order_relaxed); }

  // The scan report (ReplaySpec::scan_report), once every replay thread has ended.
  void write_report() {
    if (spec_.scan_report.empty()) return;
    std::sort(report_.begin(), report_.end(), [](const Reported& a, const Reported& b) { return a.seek < b.seek; });
    std::ofstream out(spec_.scan_report);
    for (const Reported& r : report_)
      out << r.seek << ' ' << r.cf << ' ' << (r.for_prev ? "seek_for_prev" : "seek") << ' ' << r.steps.next << ' '
          << r.steps.prev << ' ' << r.steps.matched << ' ' << r.next << ' ' << r.prev << '\n';
    if (!out.flush()) throw IoError("cannot write the scan report '" + spec_.scan_report + "'");
  }

 private:
  // A traced seek as RocksDB's Replayer runs it (trace_replay/trace_record_handler.cc of 7.8.3: default
  // ReadOptions, the traced bounds, the key and value read), then the application's recorded steps on the same
  // iterator, Next calls first, each stopping where the iterator becomes invalid.
  rocksdb::Status scan(const rocksdb::IteratorSeekQueryTraceRecord& record, const ScanSteps& steps, uint64_t seek,
                       Tally& tally) {
    auto cf = cfs_.find(record.GetColumnFamilyID());
    if (cf == cfs_.end()) return rocksdb::Status::Corruption("Invalid Column Family ID.");
    rocksdb::ReadOptions read;
    rocksdb::Slice lower = record.GetLowerBound(), upper = record.GetUpperBound();
    if (!lower.empty()) read.iterate_lower_bound = &lower;
    if (!upper.empty()) read.iterate_upper_bound = &upper;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, cf->second));
    if (record.GetSeekType() == rocksdb::IteratorSeekQueryTraceRecord::kSeekForPrev) it->SeekForPrev(record.GetKey());
    else it->Seek(record.GetKey());
    uint64_t bytes = 0;
    if (it->Valid()) bytes += it->key().ToString().size() + it->value().ToString().size();  // the Replayer copies both
    const uint64_t next = step_on(it.get(), steps.next, [](rocksdb::Iterator* i) { i->Next(); }, &bytes);
    const uint64_t prev = step_on(it.get(), steps.prev, [](rocksdb::Iterator* i) { i->Prev(); }, &bytes);
    tally.next += next;
    tally.prev += prev;
    if (!spec_.scan_report.empty()) {
      std::lock_guard<std::mutex> lock(report_mutex_);
      report_.push_back({seek, record.GetColumnFamilyID(),
                         record.GetSeekType() == rocksdb::IteratorSeekQueryTraceRecord::kSeekForPrev, steps, next,
                         prev});
    }
    if (steps.matched && (next < steps.next || prev < steps.prev)) ++tally.cut_short;
    else if (steps.matched && steps.at_end && it->Valid()) ++tally.ran_on;
    read_bytes_.fetch_add(bytes, std::memory_order_relaxed);
    return it->status();
  }

  rocksdb::Replayer& replayer_;
  const ReplaySpec& spec_;
  rocksdb::DB* db_;
  std::map<uint32_t, rocksdb::ColumnFamilyHandle*> cfs_;
  std::atomic<uint64_t> done_{0}, read_bytes_{0};
  std::mutex report_mutex_;
  std::vector<Reported> report_;
};

// The recorded steps of a seek record (the reader thread matches every record, in the trace's order).
void match_scan(ScanLengths& lengths, uint64_t number, Job* job) {
  job->scan = true;
  job->seek = number;
  job->steps = seek_steps(lengths, *job->record);
}

// Rewrite every table of every column family under the store's config: one full compaction each (the bottommost
// level too), so block size, compression and filters are the config's. Returns the seconds it took.
double rewrite_tables(const Opened& store) {
  const auto start = Clock::now();
  rocksdb::CompactRangeOptions options;
  options.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  for (auto* cf : store.cfs) {
    rocksdb::Status s = store.db->CompactRange(options, cf, nullptr, nullptr);
    if (!s.ok()) throw IoError("cannot rewrite the store's tables under the config: " + s.ToString());
  }
  return seconds_of(Clock::now() - start);
}

// Which of a trace's records a replay runs: its first `limit` (0: all), or those in its windows; and, paced, when
// each is due, the time between windows left out.
class Windows {
 public:
  explicit Windows(const ReplaySpec& spec) : limit_(spec.limit), windows_(spec.windows) {}

  // Whether to read another record, `replayed` of them replayed so far.
  bool more(uint64_t replayed) const {
    if (!windows_.empty()) return next_ < windows_.back().second;
    return limit_ == 0 || replayed < limit_;
  }

  // Whether the next record of the trace (stamped `ts`) is replayed; called once for every record read, in order.
  bool keeps(uint64_t ts) {
    const uint64_t number = next_++;
    if (windows_.empty()) return true;
    while (number >= windows_[current_].second) ++current_;  // more() keeps number below the last window's end
    if (number < windows_[current_].first) {
      gap_ = any_kept_;
      return false;
    }
    if (gap_) left_out_us_ += ts - std::min(ts, last_kept_ts_);  // a window's first record: no wait for the gap
    gap_ = false;
    any_kept_ = true;
    last_kept_ts_ = ts;
    return true;
  }

  // Microseconds after the first replayed record (stamped `first_ts`) a record stamped `ts` is due.
  uint64_t since(uint64_t first_ts, uint64_t ts) const {
    const uint64_t after = ts >= first_ts ? ts - first_ts : 0;
    return after >= left_out_us_ ? after - left_out_us_ : 0;
  }

 private:
  uint64_t limit_;
  std::vector<std::pair<uint64_t, uint64_t>> windows_;
  uint64_t next_ = 0, last_kept_ts_ = 0, left_out_us_ = 0;
  size_t current_ = 0;
  bool any_kept_ = false, gap_ = false;
};

// Reports the records replayed so far every `interval_s` (as kvbench's phases do) until `finished`.
class Reporter {
 public:
  Reporter(const Replay& replay, double interval_s, std::ostream& out, Clock::time_point start)
      : thread_([this, &replay, interval_s, &out, start] {
          const auto interval = std::chrono::duration_cast<Clock::duration>(
              std::chrono::duration<double>(std::max(interval_s, 0.001)));
          auto last = start;
          uint64_t ops_at_last = 0;
          std::unique_lock<std::mutex> lock(mutex_);
          while (!ended_.wait_until(lock, last + interval, [this] { return finished_; })) {
            const auto now = Clock::now();
            const uint64_t ops = replay.done();
            const double window = seconds_of(now - last);
            out << nlohmann::json{{"interval_s", seconds_of(now - start)}, {"phase", "replay"}, {"ops", ops},
                                  {"ops_per_s", window > 0 ? (ops - ops_at_last) / window : 0.0}}.dump()
                << std::endl;
            last = now;
            ops_at_last = ops;
          }
        }) {}
  ~Reporter() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      finished_ = true;
    }
    ended_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable ended_;
  bool finished_ = false;
  std::thread thread_;  // last: started once the members it uses exist
};

// What the replay did with the scan lengths: the file's counts, how many seeks it matched, the steps replayed.
nlohmann::json scans_of(const ScanLengths& lengths, const Tally& all) {
  nlohmann::json scans = lengths.summary();
  scans.update({{"next_replayed", all.next}, {"prev_replayed", all.prev}, {"cut_short", all.cut_short},
                {"ran_on", all.ran_on}});
  return scans;
}

}  // namespace

nlohmann::json replay_rocksdb(const std::string& path, const ReplaySpec& spec, double interval_s,
                              std::ostream& progress) {
  std::unique_ptr<ScanLengths> lengths = spec.scans.empty() ? nullptr : std::make_unique<ScanLengths>(spec.scans);
  Opened store = open_store(path, spec.config, spec.statistics);
  const double rewrite_s = spec.rewrite ? rewrite_tables(store) : 0.0;
  std::unique_ptr<rocksdb::Replayer> replayer = open_replayer(store.db, store.cfs, spec.trace);
  Replay replay(*replayer, spec, store.db, store.cfs);
  std::vector<Tally> tallies(spec.threads);
  std::vector<Lane> lanes(spec.threads > 1 ? spec.threads : 0);
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < lanes.size(); ++t)
    threads.emplace_back([&, t] {
      Job job;
      while (lanes[t].pop(&job)) replay.execute(job, tallies[t]);
    });
  uint64_t read = 0, skipped = 0, first_ts = 0, seeks = 0;
  Windows windows(spec);
  const auto start = Clock::now();
  {
    Reporter reporter(replay, interval_s, progress, start);
    try {
      while (windows.more(read)) {
        std::unique_ptr<rocksdb::TraceRecord> record = next_record(*replayer, &skipped);
        if (!record) break;
        const uint64_t ts = record->GetTimestamp();
        const bool kept = windows.keeps(ts);
        if (kept && read++ == 0) first_ts = ts;
        Job job{std::move(record), start + std::chrono::microseconds(windows.since(first_ts, ts)), false, {}};
        if (lengths && is_seek(job.record->GetTraceType())) match_scan(*lengths, seeks++, &job);  // kept or not
        if (!kept) continue;
        if (spec.paced) std::this_thread::sleep_until(job.due);
        if (lanes.empty()) {
          replay.execute(job, tallies[0]);
        } else {
          const size_t lane = std::hash<std::string>{}(first_key_of(*job.record)) % lanes.size();
          lanes[lane].push(std::move(job));
        }
      }
    } catch (...) {
      for (auto& lane : lanes) lane.close();
      for (auto& thread : threads) thread.join();
      throw;
    }
    for (auto& lane : lanes) lane.close();
    for (auto& thread : threads) thread.join();
  }
  const double elapsed = seconds_of(Clock::now() - start);
  replay.write_report();
  Tally all;
  for (const auto& tally : tallies) {
    for (const auto& [kind, h] : tally.latency) all.latency[kind].merge(h);
    all.lag.merge(tally.lag);
    if (all.errors == 0 && tally.errors > 0) all.first_error = tally.first_error;
    all.errors += tally.errors;
    all.next += tally.next;
    all.prev += tally.prev;
    all.cut_short += tally.cut_short;
    all.ran_on += tally.ran_on;
  }
  Histogram merged;
  nlohmann::json by_kind = nlohmann::json::object();
  for (const auto& [kind, h] : all.latency) {
    by_kind[kind] = summarize(h);
    merged.merge(h);
  }
  const uint64_t ops = replay.done();
  nlohmann::json phase = {{"name", "replay"}, {"kind", "replay"}, {"threads", spec.threads}, {"ops", ops},
                          {"elapsed_s", elapsed}, {"ops_per_s", elapsed > 0 ? ops / elapsed : 0.0}, {"found", 0},
                          {"not_found", 0}, {"errors", all.errors}, {"keys_seen", all.next + all.prev}, {"inserted", 0},
                          {"latency_us", by_kind}, {"latency_all_us", summarize(merged)}};
  nlohmann::json result = {
      {"engine_version", engine_version()}, {"threads", spec.threads}, {"elapsed_s", elapsed}, {"ops", ops},
      {"ops_per_s", elapsed > 0 ? ops / elapsed : 0.0}, {"phases", nlohmann::json::array({phase})},
      {"latency_us", by_kind},
      {"counts", {{"found", 0}, {"not_found", 0}, {"errors", all.errors}, {"inserted", 0}}},
      {"stats", rocksdb_counters(store.db, store.tickers)},
      {"replay", {{"records", read}, {"skipped", skipped}, {"errors", all.errors}, {"first_error", all.first_error},
                  {"paced", spec.paced}, {"rewrite_s", rewrite_s}, {"lag_us", spec.paced ? summarize(all.lag) : nlohmann::json(nullptr)},
                  {"scans", lengths ? scans_of(*lengths, all) : nlohmann::json(nullptr)}}}};
  return result;  // the store stays open: the caller crashes it (or closes it) as a run ends
}

}  // namespace kvbench
