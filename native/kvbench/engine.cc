#include "engine.h"

#include <algorithm>
#include <cctype>

namespace kvbench {

uint64_t parse_uint(const std::string& key, const std::string& value) {
  if (value.empty() || !std::all_of(value.begin(), value.end(), [](unsigned char c) { return std::isdigit(c); }))
    throw ConfigError(key + ": '" + value + "' is not a non-negative integer", false);
  try {
    return std::stoull(value);
  } catch (const std::exception&) {
    throw ConfigError(key + ": '" + value + "' is out of range", false);
  }
}

bool parse_bool(const std::string& key, const std::string& value) {
  if (value == "true" || value == "1") return true;
  if (value == "false" || value == "0") return false;
  throw ConfigError(key + ": '" + value + "' is not true or false", false);
}

}  // namespace kvbench
