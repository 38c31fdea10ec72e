// The scan lengths an application recorded beside its trace (native/scanlog/scan_log.h): read, checked, and matched
// to the trace's seeks, so a replayed seek can step its iterator as far as the application did.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

namespace kvbench {

// A scan-length file kvbench cannot read (not one, another version, a bad line): the caller's input, exit 2.
struct ScanFileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What followed one traced seek in the application: its Next and Prev calls, and whether it ran to the end.
struct ScanSteps {
  bool matched = false;  // a recorded scan was found for this seek (else: no steps, as a trace alone replays it)
  uint64_t next = 0, prev = 0;
  bool at_end = false;  // the application's iterator was invalid when its scan stopped
};

// The file's scans, queued by (column family, seek kind, key), each queue in the order the seeks began.
// A traced seek takes the first scan of its queue that began no more than kSkewUs away from the tracer's stamp;
// scans that began earlier than that are dropped as seeks the tracer did not record. Not thread-safe: the
// replay's reader thread matches every record, in the trace's order.
class ScanLengths {
 public:
  static constexpr uint64_t kSkewUs = 1000000;

  // Read and check `path`; throws ScanFileError naming the line (never its key) and what is wrong.
  explicit ScanLengths(const std::string& path);

  ScanSteps match(uint32_t cf, bool for_prev, const std::string& key, uint64_t traced_us);

  // Counts only: scans in the file, matched, dropped, the steps recorded.
  nlohmann::json summary() const;

 private:
  struct Recorded {
    uint64_t seek_us, next, prev;
    bool at_end;
  };
  std::map<std::tuple<uint32_t, bool, std::string>, std::deque<Recorded>> queues_;
  uint64_t scans_ = 0, matched_ = 0, dropped_ = 0, next_ = 0, prev_ = 0, at_end_ = 0;
  uint64_t matched_next_ = 0, matched_prev_ = 0;
};

}  // namespace kvbench
