// Key orders and request distributions, deterministic given a seed.
// The zipfian and latest generators follow YCSB's ZipfianGenerator,
// ScrambledZipfianGenerator and SkewedLatestGenerator (Gray et al.,
// "Quickly generating billion-record synthetic databases", SIGMOD 1994).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace kvbench {

// A bijection on 64-bit integers (splitmix64's finalizer): distinct record
// indices always give distinct keys, in an order unrelated to the index.
inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27; x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// YCSB's Utils.fnvhash64 (FNV-1a over the 8 bytes of the value), used to scramble zipfian draws.
inline uint64_t fnv64(uint64_t value) {
  uint64_t hash = 0xCBF29CE484222325ULL;
  for (int i = 0; i < 8; ++i) {
    hash ^= value & 0xff;
    hash *= 1099511628211ULL;
    value >>= 8;
  }
  return hash;
}

// The key of record `index`: 8 big-endian bytes of mix64(index), padded with '0' to key_size (>= 8).
inline void write_key(uint64_t index, std::string* key) {
  uint64_t mixed = mix64(index);
  for (int i = 7; i >= 0; --i) { (*key)[i] = static_cast<char>(mixed & 0xff); mixed >>= 8; }
}

inline std::string make_key(uint64_t index, size_t key_size) {
  std::string key(key_size, '0');
  write_key(index, &key);
  return key;
}

// db_bench's key of record `index` (its GenerateKeyFromInt with keys_per_prefix 0):
// the 8 big-endian bytes of the index itself, padded with '0' to key_size (>= 8).
inline std::string db_bench_key(uint64_t index, size_t key_size) {
  std::string key(key_size, '0');
  for (int i = 7; i >= 0; --i) { key[i] = static_cast<char>(index & 0xff); index >>= 8; }
  return key;
}

// Record indices 0..n-1 in sequential order or a seeded Fisher-Yates shuffle (each exactly once).
std::vector<uint64_t> ordered_indices(uint64_t n, bool shuffled, uint64_t seed);

class Zipfian {
 public:
  // Items 0..items-1, most popular first. zetan < 0: computed (O(items)).
  Zipfian(uint64_t items, double theta, double zetan = -1.0);
  uint64_t next(std::mt19937_64& rng) const;  // const: threads may share one (each with its own rng)
  // Grow the item count (for "latest"), updating zeta incrementally as YCSB does.
  void grow(uint64_t items);
  uint64_t items() const { return items_; }

 private:
  void recompute();
  uint64_t items_;
  double theta_, zetan_, zeta2_, alpha_, eta_;
};

// YCSB's scrambled zipfian: a zipfian draw over 10^10 items (constant 0.99),
// FNV-hashed onto the current record range so hot keys are spread out.
class ScrambledZipfian {
 public:
  explicit ScrambledZipfian(double theta);
  uint64_t next(std::mt19937_64& rng, uint64_t records) const;

 private:
  Zipfian zipf_;
};

double zeta(uint64_t n, double theta);

}  // namespace kvbench
