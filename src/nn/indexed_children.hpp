#pragma once
// The children of a combinator with several module types (Sequential, Parallel): built from
// init.child(i), named "i" in the walk, visited in index order.
#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include "core/module.hpp"

namespace noeira {

template <Module... Ms>
class IndexedChildren {
 public:
  explicit IndexedChildren(const Init& init) : tuple_(build(init, std::index_sequence_for<Ms...>{})) {}

  template <std::size_t I>
  auto& get() { return std::get<I>(tuple_); }

  template <class Visitor>
  void for_each_param(Visitor& visit, std::string_view prefix) {
    walk(visit, prefix, std::index_sequence_for<Ms...>{});
  }

 private:
  template <std::size_t... Is>
  static std::tuple<Ms...> build(const Init& init, std::index_sequence<Is...>) {
    return std::tuple<Ms...>(Ms(init.child(Is))...);
  }

  template <class Visitor, std::size_t... Is>
  void walk(Visitor& visit, std::string_view prefix, std::index_sequence<Is...>) {
    (std::get<Is>(tuple_).for_each_param(visit, join_name(prefix, std::to_string(Is))), ...);
  }

  std::tuple<Ms...> tuple_;
};

}  // namespace noeira
