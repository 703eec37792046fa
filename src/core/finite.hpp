#pragma once
// Non-finite numbers (NaN, ±inf) in parameters: a diverged run must not pass them on silently to
// a checkpoint, a model file, or the next run that loads either. Saving and loading scan the host
// values they handle anyway, so the check costs one pass over memory that is being copied.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "kernels/error.hpp"

namespace noeira {

// Whether non-finite parameters may be saved or loaded (--allow-non-finite: to look at a
// diverged model, never the default).
enum class NonFinite : std::uint8_t { Refuse, Allow };

// The index of the first NaN or infinity in `values`, if any.
inline std::optional<std::size_t> first_non_finite(std::span<const float> values) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) return i;
  }
  return std::nullopt;
}

// "nan", "inf" or "-inf", for messages.
inline std::string non_finite_name(double x) {
  return std::isnan(x) ? "nan" : x > 0 ? "inf" : "-inf";
}

// Unless allowed, an InputError when `values` hold a NaN or infinity: "<what>: non-finite value
// (nan) at element 12 (--allow-non-finite to <verb> it anyway)". `verb` is what the caller was
// about to do ("save", "load").
inline void refuse_non_finite(std::span<const float> values, NonFinite policy,
                              std::string_view what, std::string_view verb) {
  if (policy == NonFinite::Allow) return;
  if (const auto i = first_non_finite(values)) {
    throw InputError(detail::concat(what, ": non-finite value (", non_finite_name(values[*i]),
                                    ") at element ", *i, "; refusing to ", verb,
                                    " it (--allow-non-finite to ", verb, " it anyway)"));
  }
}

}  // namespace noeira
