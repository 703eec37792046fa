#include "cli/bounds.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <system_error>

namespace noeira::cli {

std::string shown_argument(const std::string& s) {
  constexpr std::size_t kShown = 32;
  std::string out = s.size() > kShown ? s.substr(0, kShown) + "..." : s;
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return "'" + out + "'";
}

namespace {

std::string short_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

template <class T>
bool parse_whole(const std::string& s, T& v) {
  const char* end = s.data() + s.size();
  const std::from_chars_result r = std::from_chars(s.data(), end, v);
  return r.ec == std::errc() && r.ptr == end;
}

}  // namespace

CLI::Validator whole_in(std::int64_t lo, std::int64_t hi) {
  const std::string range = std::to_string(lo) + " to " + std::to_string(hi);
  return CLI::Validator(
      [lo, hi, range](std::string& s) -> std::string {
        std::int64_t v = 0;
        if (!parse_whole(s, v) || v < lo || v > hi) {
          return "must be a whole number from " + range + ", got " + shown_argument(s);
        }
        return {};
      },
      "[" + std::to_string(lo) + ".." + std::to_string(hi) + "]");
}

CLI::Validator any_uint64() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        std::uint64_t v = 0;
        if (!parse_whole(s, v)) {
          return "must be a whole number from 0 to " +
                 std::to_string(std::numeric_limits<std::uint64_t>::max()) + ", got " + shown_argument(s);
        }
        return {};
      },
      "");
}

CLI::Validator real_in(double lo, double hi) {
  const std::string range = short_number(lo) + " to " + short_number(hi);
  return CLI::Validator(
      [lo, hi, range](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        const bool whole_text = !s.empty() && end == s.c_str() + s.size();
        if (!whole_text || !std::isfinite(v) || v < lo || v > hi) {
          return "must be a number from " + range + ", got " + shown_argument(s);
        }
        return {};
      },
      "[" + short_number(lo) + ".." + short_number(hi) + "]");
}

}  // namespace noeira::cli
