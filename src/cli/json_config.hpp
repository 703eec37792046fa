#pragma once
// A JSON config file for a subcommand: an object whose keys are the subcommand's long option names
// ("epochs", "weight-decay"; "weight_decay" works too) and whose values are what the flag would
// take. Flags given on the command line win: a key whose option was already given is skipped.
#include <CLI/CLI.hpp>
#include <filesystem>

namespace noeira::cli {

// Applies the file to the options of `command` after parsing. Keys that are options of `sibling`
// but not of `command` are skipped, so one file (a run's config.json) serves train and eval. An
// unreadable file, malformed JSON, an unknown key or a bad value is an InputError naming the file
// and the key.
void apply_json_config(CLI::App& command, const std::filesystem::path& file,
                       const CLI::App* sibling = nullptr);

}  // namespace noeira::cli
