// A transformer language model of one's own design, trained on one's own text with the whole
// noeira command line: launch modes, sharding policies, checkpoints, resume, eval, generate.
//
//   ./own_transformer train --text-file corpus.txt --steps 500 --sim-ranks 2 --policy zero3
//   ./own_transformer generate --params runs/<run>/model.h5 --prompt "The "
#include <noeira/noeira.hpp>

namespace {

constexpr std::int64_t kVocab = 256;  // room for the char or byte tokenizer's ids
constexpr std::int64_t kBlock = 64;   // the longest sequence it reads
constexpr std::int64_t kWidth = 96;

// Token and position embeddings, three pre-norm blocks of four causal heads, and a final
// LayerNorm with the output projection. Each Unit is what the sharding policies shard.
using Layers = noeira::Sequential<noeira::Unit<noeira::GptEmbeddings<kVocab, kBlock, kWidth>>,
                                  noeira::Repeat<3, noeira::Unit<noeira::GptBlock<kWidth, 4>>>,
                                  noeira::Unit<noeira::GptHead<kWidth, kVocab>>>;

// What makes it a language model for noeira: its vocabulary and its block.
struct OwnTransformer : Layers {
  static constexpr std::int64_t vocab = kVocab;
  static constexpr std::int64_t block = kBlock;
  explicit OwnTransformer(const noeira::Init& init) : Layers(init) {
    // As GPT-2: the output projection reads the token embedding's table (one tensor, two uses).
    child<0>().inner().tie(child<2>().inner().table());
  }
};

}  // namespace

int main(int argc, char** argv) {
  return noeira::run_command_line(
      argc, argv,
      {noeira::model_entry<OwnTransformer>(
          "own-transformer", "3 blocks x 4 heads, width 96, block 64, tied embedding",
          {{"--data", "text"}})});
}
