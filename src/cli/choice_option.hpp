#pragma once
// An option that names one value of an enum (core/names.hpp's NameTable): CLI11 checks the name
// against the table, and the option's callback parses it into the field once, when the option is
// given or a default is applied through it. Below the command line the field is the enum; no
// name is compared again. The field keeps its own default otherwise (shown in --help).
#include <CLI/CLI.hpp>
#include <cstddef>
#include <optional>
#include <string>

#include "core/names.hpp"
#include "kernels/error.hpp"

namespace noeira::cli {

template <class E, std::size_t N>
CLI::Option* add_choice(CLI::App& app, const std::string& flag, E& field,
                        const NameTable<E, N>& table, const std::string& help) {
  return app
      .add_option_function<std::string>(
          flag, [&field, &table](const std::string& name) { field = table.parse(name); }, help)
      ->check(CLI::IsMember(table.names()))
      ->default_str(std::string(table.name_of(field)));
}

// The same for a choice that may be left to someone else (a file's own name map): the empty name,
// which config.json records for it, is none.
template <class E, std::size_t N>
CLI::Option* add_optional_choice(CLI::App& app, const std::string& flag, std::optional<E>& field,
                                 const NameTable<E, N>& table, const std::string& help) {
  const std::string joined = table.joined();
  return app
      .add_option_function<std::string>(
          flag,
          [&field, &table](const std::string& name) {
            field = name.empty() ? std::nullopt : std::optional<E>(table.parse(name));
          },
          help)
      ->check(CLI::Validator(
          [&table](std::string& value) -> std::string {
            if (value.empty()) return {};
            for (const auto& row : table.rows) {
              if (row.name == value) return {};
            }
            return detail::concat("'", value, "' is not one of ", table.joined());
          },
          "{" + joined + "} or empty"));
}

}  // namespace noeira::cli
