// A classifier of one's own design on NumPy arrays, with the whole noeira command line: the
// launch modes, every sharding policy, checkpoints and resume (also on another number of ranks),
// metrics, eval and export. The arrays are DIR/train_x.npy (float32 [N, 32]), train_y.npy
// (integer [N], classes 0 to 4), test_x.npy and test_y.npy.
//
//   mpirun -np 2 ./npy_classifier train --data-dir DIR --policy zero3 --checkpoint-dir ck
//   ./npy_classifier train --data-dir DIR --checkpoint-dir ck --resume latest   # on one rank
//   ./npy_classifier eval --params runs/<run>/model.h5 --data-dir DIR
//   ./npy_classifier export --params runs/<run>/model.h5 -o classifier.safetensors
#include <noeira/noeira.hpp>

namespace {

// A Tanh projection of the 32 features, a residual GELU block, LayerNorm and a linear head for
// five classes. Each top-level child is one unit that the sharding policies shard.
using Block =
    noeira::Residual<noeira::Sequential<noeira::LinearGELU<64, 128>, noeira::Linear<128, 64>>>;
using Classifier = noeira::Sequential<noeira::LinearTanh<32, 64>, Block, noeira::LayerNorm<64>,
                                      noeira::Linear<64, 5>>;

}  // namespace

int main(int argc, char** argv) {
  // The model's defaults give way to any flag the user sets.
  return noeira::run_command_line(
      argc, argv,
      {noeira::model_entry<Classifier>(
          "classifier", "32 features, residual GELU MLP, LayerNorm, 5 classes",
          {{"--data", "npy"}, {"--optimizer", "adamw"}, {"--lr", "3e-3"}, {"--batch", "64"}})});
}
