// The threads of one phase: what each did (a Worker), running them while the calling thread reports progress,
// and the record indices a mix's inserts hand out across them.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <mutex>
#include <ostream>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "engine.h"
#include "generators.h"
#include "histogram.h"

namespace kvbench {

using Clock = std::chrono::steady_clock;

inline double seconds(Clock::duration duration) { return std::chrono::duration<double>(duration).count(); }

// Thread t's generator seed in a phase seeded `seed`. Thread 0 keeps the phase's seed, so a one-thread run
// draws exactly what kvbench drew before it had threads; the others take a hash of the seed and their index.
inline uint64_t thread_seed(uint64_t seed, unsigned t) { return t == 0 ? seed : mix64(seed + t); }

// One thread's part of a phase: its counts and latencies, merged when the phase ends, and the error that
// stopped it. Each on a cache line of its own, as `ops` is written at every operation.
struct alignas(64) Worker {
  std::atomic<uint64_t> ops{0};  // written by its own thread only; the progress reporter reads it meanwhile
  uint64_t found = 0, not_found = 0, keys_seen = 0, inserted = 0;
  std::map<std::string, Histogram> latency;
  std::exception_ptr error;

  template <typename F>
  void timed(Histogram& histogram, F&& body) {
    const auto begin = Clock::now();
    body();
    histogram.add(static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - begin).count()));
    ops.store(ops.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);  // one writer: no locked add
  }

  void lookup(Engine& engine, std::string_view key) {
    if (engine.get(key) == Lookup::kFound) ++found; else ++not_found;
  }
};

// Where and how often a phase reports its progress: a JSON line on `out` every `interval_s` from `start`.
struct Progress {
  std::ostream& out;
  std::string phase;
  double interval_s;
  Clock::time_point start;
};

// The threads of a phase still running: the calling thread waits on it, waking to report progress.
class Running {
 public:
  explicit Running(unsigned threads) : left_(threads) {}
  void finished();
  // Whether every thread has finished, waiting for that until `deadline` at the most.
  bool finished_by(Clock::time_point deadline);

 private:
  std::mutex mutex_;
  std::condition_variable ended_;
  unsigned left_;
};

// Reports the operations of all `workers` so far every `progress.interval_s` until `running` says all finished.
void report_until_finished(Running& running, const std::vector<Worker>& workers, const Progress& progress);

// Runs `work(worker, t)` for t in 0..threads-1, each on a thread of its own, and reports progress from the
// calling thread until all have finished. A thread's error sets `stop` (the others' loops end at their next
// operation) and is rethrown here once every thread has ended.
template <typename Work>
std::vector<Worker> run_on_threads(unsigned threads, Work&& work, std::atomic<bool>& stop, const Progress& progress) {
  std::vector<Worker> workers(threads);
  Running running(threads);
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      try {
        work(workers[t], t);
      } catch (...) {
        workers[t].error = std::current_exception();
        stop = true;
      }
      running.finished();
    });
  report_until_finished(running, workers, progress);
  for (auto& thread : pool) thread.join();
  for (const auto& worker : workers)
    if (worker.error) std::rethrow_exception(worker.error);
  return workers;
}

// The record indices a mix phase's inserts take. `claim` hands out the next one (unique across threads, so the
// store holds exactly records + inserts keys afterwards). `published` counts the records 0..published-1 that
// are all written: another thread's insert of a higher index may still be in flight, or may have finished
// before a lower one, so reads drawn below `published` must find their key, and reads never race an insert.
class Inserts {
 public:
  explicit Inserts(uint64_t records) : next_(records), published_(records) {}
  uint64_t claim() { return next_.fetch_add(1, std::memory_order_relaxed); }
  // Record `index` is written (its put returned): publish it, with every written index right above it.
  void written(uint64_t index);
  uint64_t published() const { return published_.load(std::memory_order_acquire); }

 private:
  std::atomic<uint64_t> next_, published_;
  std::mutex mutex_;
  std::set<uint64_t> waiting_;  // written, but above an index whose insert has not returned yet
};

}  // namespace kvbench
