#include "train/name_map.hpp"

#include <charconv>

#include "kernels/error.hpp"
#include "train/presets.hpp"

namespace noeira {

namespace {

bool ends_with(std::string_view s, std::string_view suffix) { return s.ends_with(suffix); }

// Splits "12.rest" into 12 and "rest"; false when the name does not start with an index.
bool split_index(std::string_view name, std::int64_t& index, std::string_view& rest) {
  const std::size_t dot = name.find('.');
  if (dot == std::string_view::npos || dot == 0) return false;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + dot, index);
  if (ec != std::errc() || end != name.data() + dot) return false;
  rest = name.substr(dot + 1);
  return true;
}

[[noreturn]] void unmapped(std::string_view walk_name, std::string_view family) {
  throw InputError(detail::concat("the ", family, " name map has no name for '", walk_name, "'"));
}

// torch.nn.Sequential puts a ReLU module between noeira's fused Linear+ReLU layers: layer i is
// module 2i.
ForeignName torch_sequential_name(std::string_view walk_name) {
  std::int64_t index = 0;
  std::string_view rest;
  if (!split_index(walk_name, index, rest)) unmapped(walk_name, "torch.nn.Sequential");
  return {detail::concat(2 * index, ".", rest)};
}

// GPT-2's block parts by noeira's part names; its Linear-like layers are Conv1D, whose weight is
// [in, out], the transpose of noeira's (and torch.nn.Linear's) [out, in].
struct Gpt2Part {
  std::string_view walk;
  std::string_view gpt2;
  bool conv1d;
};
constexpr Gpt2Part kGpt2Parts[] = {
    {"ln_1.", "ln_1.", false},           {"ln_2.", "ln_2.", false},
    {"attn.qkv.", "attn.c_attn.", true}, {"attn.proj.", "attn.c_proj.", true},
    {"mlp.0.", "mlp.c_fc.", true},       {"mlp.1.", "mlp.c_proj.", true},
};

ForeignName gpt2_name(std::string_view walk_name) {
  // The head's table is the token embedding (tied), stored once under the embedding's name.
  if (walk_name == "lm_head.weight") return {"transformer.wte.weight"};
  if (walk_name == "wpe.weight" || walk_name.starts_with("ln_f.")) {
    return {detail::concat("transformer.", walk_name)};
  }
  std::int64_t layer = 0;
  std::string_view rest;
  if (walk_name.starts_with("h.") && split_index(walk_name.substr(2), layer, rest)) {
    for (const Gpt2Part& part : kGpt2Parts) {
      if (!rest.starts_with(part.walk)) continue;
      const std::string_view leaf = rest.substr(part.walk.size());
      return {detail::concat("transformer.h.", layer, ".", part.gpt2, leaf),
              part.conv1d && leaf == "weight"};
    }
  }
  unmapped(walk_name, "GPT-2");
}

// The recurrent LMs as an nn.Module with `embed` (nn.Embedding), `rnn` (nn.LSTM / nn.GRU,
// num_layers=2) and `head` (nn.Linear): children 1 and 2 are the rnn's layers l0 and l1.
ForeignName recurrent_lm_name(std::string_view walk_name) {
  std::int64_t index = 0;
  std::string_view rest;
  if (split_index(walk_name, index, rest)) {
    if (index == 0 && rest == "weight") return {"embed.weight"};
    if (index == 1 || index == 2) return {detail::concat("rnn.", rest, "_l", index - 1)};
    if (index == 3) return {detail::concat("head.", rest)};
  }
  unmapped(walk_name, "recurrent language model");
}

[[noreturn]] void throw_no_map(std::string_view model) {
  throw InputError(detail::concat("model '", model,
                                  "' has no PyTorch name map (there are maps for mlp, linear, "
                                  "mlp-cifar, the gpt, lstm and gru presets, resnet18 and "
                                  "resnet20); use --names noeira"));
}

}  // namespace

NameMap NameMap::for_preset(NameScheme scheme, std::string_view model) {
  if (scheme == NameScheme::Noeira) return NameMap(scheme, Family::Identity);
  // A map is for a preset's own type: a program's model named like one ("gpt-mine") has none.
  if (find_preset(model) == nullptr) throw_no_map(model);
  if (model == "mlp" || model == "linear" || model == "mlp-cifar") {
    return NameMap(scheme, Family::TorchSequential);
  }
  if (model.starts_with("gpt")) return NameMap(scheme, Family::Gpt2);
  if (model.starts_with("lstm") || model.starts_with("gru")) {
    return NameMap(scheme, Family::RecurrentLm);
  }
  if (model == "resnet18" || model == "resnet20" || model == "resnet20-cifar") {
    return NameMap(scheme, Family::Torchvision);
  }
  throw_no_map(model);
}

ForeignName NameMap::map(std::string_view walk_name) const {
  switch (family_) {
    case Family::Identity:
      return {std::string(walk_name)};
    case Family::TorchSequential:
      return torch_sequential_name(walk_name);
    case Family::Gpt2:
      return gpt2_name(walk_name);
    case Family::Torchvision:
      return {std::string(walk_name), false, ends_with(walk_name, ".num_batches_tracked")};
    case Family::RecurrentLm:
      return recurrent_lm_name(walk_name);
  }
  unmapped(walk_name, "?");
}

bool NameMap::ignorable(std::string_view stored_name) const {
  if (family_ != Family::Gpt2) return false;
  return stored_name == "lm_head.weight" ||
         (stored_name.starts_with("transformer.h.") &&
          (ends_with(stored_name, ".attn.bias") || ends_with(stored_name, ".attn.masked_bias")));
}

std::optional<std::string> NameMap::copy_of(std::string_view stored_name) const {
  if (family_ == Family::Gpt2 && stored_name == "lm_head.weight") {
    return gpt2_name(stored_name).name;
  }
  return std::nullopt;
}

}  // namespace noeira
