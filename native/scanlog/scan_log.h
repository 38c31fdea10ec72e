// scan_log.h: record what RocksDB 7.8's tracer drops, the length of every traced scan (docs/replay.md, "Scan lengths").
//
// RocksDB's tracer (DB::StartTrace) records an iterator's Seek and SeekForPrev, not the Next and Prev calls that
// follow them. An application that wraps its iterators in ScanLoggedIterator (or opens its store through
// ScanLoggingDB, whose NewIterator does it) writes, beside the trace, one line per traced seek: how many Next and
// Prev calls followed it before the iterator's next seek or its end, and whether the iterator had become invalid
// (the end of its range) when the scan stopped. `knobtune capture rocksdb --from TRACE --scans FILE` takes the
// file; the replay then steps each matched seek's iterator as far as the application did.
//
// Header-only, C++17, needs only RocksDB's public headers; include it from your source tree:
//   #include "scan_log.h"   // native/scanlog/scan_log.h of knobtune, copied or on the include path
//
// The file (UTF-8 text, written owner-only; it holds keys, keep it as private as the trace):
//   knobtune-scans 1
//   <cf>\t<kind>\t<seek_us>\t<next>\t<prev>\t<stop>\t<key>
//   ...
// cf: the column family's id (ColumnFamilyHandle::GetID(); 0 is "default"); kind: seek or seek_for_prev;
// seek_us: the wall clock in microseconds since the Unix epoch just before the seek (the tracer stamps its record
// with the same clock: it matches a line to the traced seek of the same cf, kind and key); next, prev: the Next and
// Prev calls after the seek; stop: end (the iterator was invalid when the scan stopped) or more (it was still
// valid: the application stopped); key: the seek's key in lowercase hex (empty for an empty key).
// Lines are written as scans end, so they are not in the trace's order; the replay matches them (replay.cc).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/utilities/stackable_db.h>

namespace scanlog {

constexpr const char* kMagic = "knobtune-scans";
constexpr int kVersion = 1;

// One scan: a traced seek and what followed it.
struct Scan {
  uint32_t cf = 0;
  bool for_prev = false;  // SeekForPrev (else Seek)
  std::string key;
  uint64_t seek_us = 0;
  uint64_t next = 0, prev = 0;
  bool at_end = false;  // the iterator was invalid when the scan stopped
};

// Microseconds since the Unix epoch, the clock RocksDB's tracer stamps its records with (SystemClock::NowMicros).
inline uint64_t now_us() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::system_clock::now().time_since_epoch()).count());
}

// The side file, shared by every iterator of a store; thread-safe. Start it just before DB::StartTrace and End it
// just after DB::EndTrace: scans that begin while it is not started are not written.
class ScanLog {
 public:
  ScanLog() = default;
  ScanLog(const ScanLog&) = delete;
  ScanLog& operator=(const ScanLog&) = delete;
  ~ScanLog() { End(); }

  // Create `path` (owner-only; an existing file is replaced) and write the header.
  rocksdb::Status Start(const std::string& path) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (file_) return rocksdb::Status::InvalidArgument("the scan log is already started");
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return rocksdb::Status::IOError("cannot create the scan log", path);
    file_ = ::fdopen(fd, "w");
    if (!file_) {
      ::close(fd);
      return rocksdb::Status::IOError("cannot open the scan log", path);
    }
    std::fprintf(file_, "%s %d\n", kMagic, kVersion);
    live_.store(++epoch_, std::memory_order_release);
    return rocksdb::Status::OK();
  }

  // Write what is buffered and close the file (scans still open are not written).
  rocksdb::Status End() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!file_) return rocksdb::Status::OK();
    const bool ok = std::fflush(file_) == 0 && !std::ferror(file_);
    const bool closed = std::fclose(file_) == 0;
    file_ = nullptr;
    live_.store(0, std::memory_order_release);
    return ok && closed ? rocksdb::Status::OK() : rocksdb::Status::IOError("writing the scan log failed");
  }

  // Which run of the log a scan began in (0: none); a scan is written only if the log is still in that run.
  // Lock-free: an iterator asks at every seek.
  uint64_t Epoch() const { return live_.load(std::memory_order_acquire); }

  void Write(const Scan& scan, uint64_t epoch) {
    std::string line = std::to_string(scan.cf) + (scan.for_prev ? "\tseek_for_prev\t" : "\tseek\t") +
                       std::to_string(scan.seek_us) + "\t" + std::to_string(scan.next) + "\t" +
                       std::to_string(scan.prev) + (scan.at_end ? "\tend\t" : "\tmore\t");
    static const char kHex[] = "0123456789abcdef";
    for (unsigned char c : scan.key) {
      line += kHex[c >> 4];
      line += kHex[c & 15];
    }
    line += '\n';
    std::lock_guard<std::mutex> lock(mutex_);
    if (file_ && epoch == live_.load(std::memory_order_relaxed)) std::fwrite(line.data(), 1, line.size(), file_);
  }

 private:
  std::mutex mutex_;
  std::FILE* file_ = nullptr;
  uint64_t epoch_ = 0;  // runs started so far
  std::atomic<uint64_t> live_{0};  // the run now open (0: none)
};

// An iterator that counts the Next and Prev calls after each Seek and SeekForPrev (the seeks RocksDB traces) and
// writes each scan to `log` when it ends: at the iterator's next seek or when it is destroyed. SeekToFirst and
// SeekToLast are not traced by RocksDB 7.8, so the scans they begin are not written.
class ScanLoggedIterator : public rocksdb::Iterator {
 public:
  ScanLoggedIterator(rocksdb::Iterator* base, uint32_t cf, ScanLog* log) : base_(base), cf_(cf), log_(log) {}
  ~ScanLoggedIterator() override { Finish(); }

  bool Valid() const override { return base_->Valid(); }
  void SeekToFirst() override { Finish(); base_->SeekToFirst(); }
  void SeekToLast() override { Finish(); base_->SeekToLast(); }
  void Seek(const rocksdb::Slice& target) override { Begin(target, false); base_->Seek(target); }
  void SeekForPrev(const rocksdb::Slice& target) override { Begin(target, true); base_->SeekForPrev(target); }
  void Next() override { base_->Next(); ++scan_.next; }
  void Prev() override { base_->Prev(); ++scan_.prev; }
  rocksdb::Slice key() const override { return base_->key(); }
  rocksdb::Slice value() const override { return base_->value(); }
  const rocksdb::WideColumns& columns() const override { return base_->columns(); }
  rocksdb::Status status() const override { return base_->status(); }
  rocksdb::Status Refresh() override { return base_->Refresh(); }
  rocksdb::Status GetProperty(std::string name, std::string* prop) override {
    return base_->GetProperty(std::move(name), prop);
  }
  rocksdb::Slice timestamp() const override { return base_->timestamp(); }

 private:
  void Begin(const rocksdb::Slice& target, bool for_prev) {
    Finish();
    epoch_ = log_->Epoch();
    if (epoch_ == 0) return;
    scan_ = Scan{cf_, for_prev, target.ToString(), now_us(), 0, 0, false};
  }
  void Finish() {
    if (epoch_ == 0) return;
    scan_.at_end = !base_->Valid();
    log_->Write(scan_, epoch_);
    epoch_ = 0;
  }

  std::unique_ptr<rocksdb::Iterator> base_;
  uint32_t cf_;
  ScanLog* log_;
  uint64_t epoch_ = 0;  // the log's run the open scan began in; 0: no scan open
  Scan scan_;
};

// A store whose iterators are ScanLoggedIterators. It owns `db` (as every StackableDB does) and forwards
// StartTrace and EndTrace to it (RocksDB 7.8's StackableDB does not).
class ScanLoggingDB : public rocksdb::StackableDB {
 public:
  ScanLoggingDB(rocksdb::DB* db, ScanLog* log) : rocksdb::StackableDB(db), log_(log) {}

  using rocksdb::StackableDB::NewIterator;
  rocksdb::Iterator* NewIterator(const rocksdb::ReadOptions& options, rocksdb::ColumnFamilyHandle* cf) override {
    return new ScanLoggedIterator(db_->NewIterator(options, cf), cf->GetID(), log_);
  }
  rocksdb::Status NewIterators(const rocksdb::ReadOptions& options,
                               const std::vector<rocksdb::ColumnFamilyHandle*>& cfs,
                               std::vector<rocksdb::Iterator*>* iterators) override {
    rocksdb::Status s = db_->NewIterators(options, cfs, iterators);
    if (s.ok())
      for (size_t i = 0; i < iterators->size(); ++i)
        (*iterators)[i] = new ScanLoggedIterator((*iterators)[i], cfs[i]->GetID(), log_);
    return s;
  }
  rocksdb::Status StartTrace(const rocksdb::TraceOptions& options,
                             std::unique_ptr<rocksdb::TraceWriter>&& writer) override {
    return db_->StartTrace(options, std::move(writer));
  }
  rocksdb::Status EndTrace() override { return db_->EndTrace(); }

 private:
  ScanLog* log_;
};

}  // namespace scanlog
