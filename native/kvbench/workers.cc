#include "workers.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace kvbench {

namespace {

// The shortest reporting interval: `--interval-ms 0` must not turn the reporter into a busy loop.
constexpr double kMinIntervalS = 0.001;

uint64_t total_ops(const std::vector<Worker>& workers) {
  uint64_t ops = 0;
  for (const auto& worker : workers) ops += worker.ops.load(std::memory_order_relaxed);
  return ops;
}

}  // namespace

void Running::finished() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (--left_ == 0) ended_.notify_all();
}

bool Running::finished_by(Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  return ended_.wait_until(lock, deadline, [this] { return left_ == 0; });
}

void report_until_finished(Running& running, const std::vector<Worker>& workers, const Progress& progress) {
  const auto interval = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(std::max(progress.interval_s, kMinIntervalS)));
  Clock::time_point last = progress.start;
  uint64_t ops_at_last = 0;
  while (!running.finished_by(last + interval)) {
    const Clock::time_point now = Clock::now();
    const uint64_t ops = total_ops(workers);
    const double window = seconds(now - last);
    progress.out << nlohmann::json{{"interval_s", seconds(now - progress.start)}, {"phase", progress.phase},
                                   {"ops", ops}, {"ops_per_s", window > 0 ? (ops - ops_at_last) / window : 0.0}}.dump()
                 << std::endl;
    last = now;
    ops_at_last = ops;
  }
}

void Inserts::written(uint64_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  waiting_.insert(index);
  uint64_t published = published_.load(std::memory_order_relaxed);
  while (!waiting_.empty() && *waiting_.begin() == published) {
    waiting_.erase(waiting_.begin());
    ++published;
  }
  published_.store(published, std::memory_order_release);  // after the puts: a reader that sees it sees them
}

}  // namespace kvbench
