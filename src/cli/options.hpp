#pragma once
// The command line's options: one Command per subcommand (train, eval) holding the TrainConfig
// its flags fill, and finish_config, which applies a JSON config file, the defaults of the task
// the data implies (text: a GPT, nanoGPT's CPU run) and checks what only makes sense for one task.
#include <CLI/CLI.hpp>
#include <string>

#include "train/config.hpp"

namespace noeira::cli {

struct Command {
  CLI::App* app = nullptr;
  const CLI::App* sibling = nullptr;  // whose config keys this command ignores
  TrainConfig config;
  std::string config_file;
  std::string log_format = "human";
};

void add_train_command(CLI::App& app, Command& c);
void add_eval_command(CLI::App& app, Command& c);

// After parsing: the config file (flags win), the text defaults (for options neither given nor
// in the file), the log format and the thread count; an option of the other task is an error.
void finish_config(Command& c);

}  // namespace noeira::cli
