#include "scan_lengths.h"

#include <algorithm>
#include <fstream>
#include <vector>

namespace kvbench {
namespace {

constexpr const char* kHeader = "knobtune-scans 1";

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> fields;
  size_t begin = 0;
  for (;;) {
    const size_t tab = line.find('\t', begin);
    fields.push_back(line.substr(begin, tab == std::string::npos ? std::string::npos : tab - begin));
    if (tab == std::string::npos) return fields;
    begin = tab + 1;
  }
}

bool parse_count(const std::string& text, uint64_t* value) {
  if (text.empty() || text.size() > 19 || !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  *value = std::stoull(text);
  return true;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool parse_hex(const std::string& text, std::string* key) {
  if (text.size() % 2) return false;
  key->clear();
  for (size_t i = 0; i < text.size(); i += 2) {
    const int high = hex_digit(text[i]), low = hex_digit(text[i + 1]);
    if (high < 0 || low < 0) return false;
    key->push_back(static_cast<char>(high * 16 + low));
  }
  return true;
}

}  // namespace

ScanLengths::ScanLengths(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw ScanFileError("cannot read the scan lengths '" + path + "'");
  std::string line;
  if (!std::getline(file, line) || line.rfind("knobtune-scans ", 0) != 0)
    throw ScanFileError("'" + path + "' is not a scan-length file (its first line is not '" + kHeader + "')");
  if (line != kHeader)
    throw ScanFileError("'" + path + "' is a scan-length file of another version ('" + line.substr(0, 40) +
                        "'; this kvbench reads '" + kHeader + "')");
  uint64_t number = 1;
  while (std::getline(file, line)) {
    ++number;
    const std::string at = "'" + path + "' line " + std::to_string(number) + ": ";
    if (file.eof()) throw ScanFileError(at + "the last line is cut short (no newline): the file was not closed");
    const std::vector<std::string> f = split_tabs(line);
    if (f.size() != 7) throw ScanFileError(at + std::to_string(f.size()) + " tab-separated fields, not 7");
    uint64_t cf = 0;
    Recorded scan{};
    std::string key;
    if (!parse_count(f[0], &cf) || cf > UINT32_MAX) throw ScanFileError(at + "the column family id is no number");
    if (f[1] != "seek" && f[1] != "seek_for_prev") throw ScanFileError(at + "the kind is not seek or seek_for_prev");
    if (!parse_count(f[2], &scan.seek_us)) throw ScanFileError(at + "seek_us is no number of microseconds");
    if (!parse_count(f[3], &scan.next) || !parse_count(f[4], &scan.prev))
      throw ScanFileError(at + "next and prev must be counts");
    if (f[5] != "end" && f[5] != "more") throw ScanFileError(at + "stop is not end or more");
    if (!parse_hex(f[6], &key)) throw ScanFileError(at + "the key is not hex digits");
    scan.at_end = f[5] == "end";
    queues_[{static_cast<uint32_t>(cf), f[1] == "seek_for_prev", std::move(key)}].push_back(scan);
    ++scans_;
    next_ += scan.next;
    prev_ += scan.prev;
    at_end_ += scan.at_end;
  }
  if (file.bad()) throw ScanFileError("reading '" + path + "' failed");
  for (auto& [key, queue] : queues_)  // written as scans ended: put each key's scans back in the order they began
    std::stable_sort(queue.begin(), queue.end(), [](const Recorded& a, const Recorded& b) { return a.seek_us < b.seek_us; });
}

ScanSteps ScanLengths::match(uint32_t cf, bool for_prev, const std::string& key, uint64_t traced_us) {
  auto found = queues_.find({cf, for_prev, key});
  if (found == queues_.end()) return {};
  std::deque<Recorded>& queue = found->second;
  while (!queue.empty() && queue.front().seek_us + kSkewUs < traced_us) {
    queue.pop_front();
    ++dropped_;
  }
  if (queue.empty() || queue.front().seek_us > traced_us + kSkewUs) return {};
  const Recorded scan = queue.front();
  queue.pop_front();
  ++matched_;
  matched_next_ += scan.next;
  matched_prev_ += scan.prev;
  return {true, scan.next, scan.prev, scan.at_end};
}

nlohmann::json ScanLengths::summary() const {
  return {{"scans", scans_}, {"next", next_}, {"prev", prev_}, {"at_end", at_end_}, {"matched", matched_},
          {"matched_next", matched_next_}, {"matched_prev", matched_prev_}, {"dropped", dropped_},
          {"unmatched", scans_ - matched_ - dropped_}};
}

}  // namespace kvbench
