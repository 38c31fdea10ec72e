// A log-bucketed latency histogram: relative error under 1/64 (1.6%), any range.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvbench {

class Histogram {
 public:
  Histogram() : buckets_(64 * kSub, 0) {}

  void add(uint64_t nanos) {
    ++buckets_[bucket(nanos)];
    ++count_;
    sum_ += nanos;
    max_ = std::max(max_, nanos);
  }

  void merge(const Histogram& other) {
    for (size_t i = 0; i < buckets_.size(); ++i) buckets_[i] += other.buckets_[i];
    count_ += other.count_;
    sum_ += other.sum_;
    max_ = std::max(max_, other.max_);
  }

  uint64_t count() const { return count_; }
  double mean_us() const { return count_ ? sum_ / 1000.0 / count_ : 0.0; }
  double max_us() const { return max_ / 1000.0; }

  // The q-quantile (0..1) in microseconds: the midpoint of the bucket holding it.
  double percentile_us(double q) const {
    if (count_ == 0) return 0.0;
    uint64_t rank = static_cast<uint64_t>(q * count_);
    if (rank >= count_) rank = count_ - 1;
    uint64_t seen = 0;
    for (size_t i = 0; i < buckets_.size(); ++i) {
      seen += buckets_[i];
      if (seen > rank) return std::min(midpoint(i), static_cast<double>(max_)) / 1000.0;
    }
    return max_us();
  }

 private:
  static constexpr int kSubBits = 6;
  static constexpr int kSub = 1 << kSubBits;

  static size_t bucket(uint64_t v) {
    if (v < kSub) return v;
    int msb = 63 - __builtin_clzll(v);
    uint64_t sub = (v >> (msb - kSubBits)) & (kSub - 1);
    return static_cast<size_t>(msb - kSubBits + 1) * kSub + sub;
  }
  static double midpoint(size_t index) {
    if (index < kSub) return static_cast<double>(index);
    size_t group = index / kSub, sub = index % kSub;
    int msb = static_cast<int>(group) + kSubBits - 1;
    double low = static_cast<double>((uint64_t{1} << msb) + (static_cast<uint64_t>(sub) << (msb - kSubBits)));
    return low + static_cast<double>(uint64_t{1} << (msb - kSubBits)) / 2.0;
  }

  std::vector<uint64_t> buckets_;
  uint64_t count_ = 0, sum_ = 0, max_ = 0;
};

// A histogram as the result JSON gives it: count, percentiles, max and mean, in microseconds.
inline nlohmann::json summarize(const Histogram& h) {
  return {{"count", h.count()}, {"p50", h.percentile_us(0.50)}, {"p95", h.percentile_us(0.95)},
          {"p99", h.percentile_us(0.99)}, {"p99.9", h.percentile_us(0.999)}, {"max", h.max_us()},
          {"mean", h.mean_us()}};
}

}  // namespace kvbench
