#pragma once
// Name maps: what a tensor of noeira's parameter and buffer walk is called in another
// framework's files. One place per family of presets; the exporter and the importer
// (train/weights_file.hpp) ask the map about every name the walk visits.
//
//   noeira   the walk's own names, as model.h5 has them ("0.weight", "h.1.attn.qkv.bias").
//   pytorch  what the PyTorch model of the same network calls them in its state_dict:
//     mlp, linear, mlp-cifar   torch.nn.Sequential(Linear, ReLU, Linear, ReLU, Linear):
//                              noeira's layer i is module 2i ("1.weight" -> "2.weight")
//     gpt-*                    Hugging Face GPT-2 (and nanoGPT's from_pretrained):
//                              transformer.{wpe,wte,ln_f}, transformer.h.<i>.{ln_1, attn.c_attn,
//                              attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj}; the four matrices are
//                              stored transposed ([in, out], GPT-2's Conv1D); the tied head is
//                              stored once, as transformer.wte.weight; the attention mask
//                              buffers (attn.bias, attn.masked_bias) in the file are left
//                              unread, and so is a lm_head.weight that is the same bits as
//                              transformer.wte.weight (a head of its own is refused: the
//                              presets tie it).
//     resnet18, resnet20*      torchvision's names, which the walk already uses; BatchNorm's
//                              num_batches_tracked is a 0-d I64 counter there.
//     lstm-*, gru-*            an nn.Module of embed (nn.Embedding), rnn (nn.LSTM / nn.GRU with
//                              num_layers=2, batch_first=True) and head (nn.Linear):
//                              "1.weight_ih" -> "rnn.weight_ih_l0", "3.bias" -> "head.bias".
// Other presets have no PyTorch map: asking for one is an InputError.
#include <optional>
#include <string>
#include <string_view>

#include "core/names.hpp"

namespace noeira {

enum class NameScheme { Noeira, Pytorch };

inline constexpr NameTable<NameScheme, 2> kNameSchemeNames{
    {{{NameScheme::Noeira, "noeira"}, {NameScheme::Pytorch, "pytorch"}}}, "name map"};

// How one walk tensor is stored under a name map.
struct ForeignName {
  std::string name;
  bool transposed = false;  // a matrix [rows, cols] stored as its transpose [cols, rows]
  bool counter = false;     // a whole-number counter, stored as a 0-d I64 (num_batches_tracked)
};

class NameMap {
 public:
  // The map of `scheme` for the preset `model`; InputError when the preset has none.
  static NameMap for_preset(NameScheme scheme, std::string_view model);

  NameScheme scheme() const { return scheme_; }
  // The stored name of the walk's tensor `walk_name`.
  ForeignName map(std::string_view walk_name) const;
  // Whether a stored tensor that no walk tensor maps to may be left unread (GPT-2's mask buffers,
  // a second copy of the tied head); any other such tensor means another network.
  bool ignorable(std::string_view stored_name) const;
  // The stored name of the tensor an ignorable stored tensor must equal bit for bit, where it is
  // a copy of a tied one (GPT-2's lm_head.weight: transformer.wte.weight); empty for the others.
  std::optional<std::string> copy_of(std::string_view stored_name) const;

 private:
  enum class Family { Identity, TorchSequential, Gpt2, Torchvision, RecurrentLm };
  NameMap(NameScheme scheme, Family family) : scheme_(scheme), family_(family) {}

  NameScheme scheme_;
  Family family_;
};

}  // namespace noeira
