#pragma once
// CLI11 validators for numeric flags: a value outside what makes sense is refused on the command
// line (and in a --config file, whose values run through the same options) with one short line in
// the flag's own terms, e.g. "--epochs: must be a whole number from 1 to 1000000, got 1e30".
// CLI11's own checks would print DBL_MAX in full, let "-1" wrap to 2^64-1 and "1e23" saturate.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace noeira::cli {

// What the user typed, quoted, shortened so that a pasted megabyte stays one readable line, with
// control characters shown as '?'.
std::string shown_argument(const std::string& s);

// A whole number in [lo, hi], written in decimal digits (no sign for lo >= 0, no exponent).
CLI::Validator whole_in(std::int64_t lo, std::int64_t hi);
// Any uint64 (a seed), in decimal digits.
CLI::Validator any_uint64();
// A finite number in [lo, hi].
CLI::Validator real_in(double lo, double hi);

}  // namespace noeira::cli
