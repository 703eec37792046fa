#pragma once
// One table per enum for the names a user types: parsing, printing and listing the choices all
// read the same rows, so a new value is one new row and every message lists it.
//
//   inline constexpr NameTable<Policy, 4> kPolicyNames{{{{Policy::Ddp, "ddp"}, ...}}, "policy"};
//   parse_name(kPolicyNames, "zero4")  // InputError: unknown policy 'zero4', expected one of:
//                                      //   ddp, zero1, zero2, zero3
#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/error.hpp"

namespace noeira {

// The error for a name that is none of `choices` ("a, b, c").
[[noreturn]] inline void throw_unknown_name(std::string_view what, std::string_view name,
                                            std::string_view choices) {
  throw InputError(detail::concat("unknown ", what, " '", name, "', expected one of: ", choices));
}

template <class E>
struct NamedValue {
  E value;
  std::string_view name;
};

template <class E, std::size_t N>
struct NameTable {
  std::array<NamedValue<E>, N> rows;
  std::string_view what;  // "policy", "optimizer", ...: how messages call the choice

  // Every name, in table order.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const NamedValue<E>& r : rows) out.emplace_back(r.name);
    return out;
  }

  // "a, b, c".
  std::string joined() const {
    std::string s;
    for (const NamedValue<E>& r : rows) s += (s.empty() ? "" : ", ") + std::string(r.name);
    return s;
  }

  // The value a name stands for; an unknown name is an InputError listing every name.
  E parse(std::string_view name) const {
    for (const NamedValue<E>& r : rows) {
      if (r.name == name) return r.value;
    }
    throw_unknown_name(what, name, joined());
  }

  // The name of a value ("?" for a value outside the table, which a switch would not catch).
  std::string_view name_of(E value) const {
    for (const NamedValue<E>& r : rows) {
      if (r.value == value) return r.name;
    }
    return "?";
  }
};

}  // namespace noeira
