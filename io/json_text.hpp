#pragma once
// A JSON text a user handed in (a safetensors header, a --config file), parsed into
// nlohmann::json with what is wrong said where it is: a line, a column and the text read last,
// for the caller to put in its own one-line error. nlohmann's exceptions name its internals
// ("[json.exception.out_of_range.406] number overflow") and give no line.
//
// The text is parsed whole into memory: the callers cap its size first (a DOM costs tens of
// bytes per byte of JSON).
#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace noeira::io {

// What is wrong with a JSON text, and where (line and column count from 1; 0 where unknown).
struct JsonProblem {
  std::string what;   // "not valid JSON", "a number out of range", "key ... given twice"
  std::size_t line = 0;
  std::size_t column = 0;
  std::string token;  // the text read last, in full: the caller shortens it
};

// Parses `text` into `out`. The problem, if any: the text is not one JSON value, a number is
// beyond double's range, or an object names a key twice (nlohmann would keep the last one
// silently: a config that sets "lr" twice, a header that describes a tensor twice).
std::optional<JsonProblem> parse_json(std::string_view text, nlohmann::json& out);

}  // namespace noeira::io
