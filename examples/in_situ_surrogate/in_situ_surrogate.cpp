// In situ: a 2-D heat equation keeps stepping on one MPI rank while two others, on a communicator
// of their own, train a surrogate of its update on fields it sent them over MPI (no file), then
// check the surrogate against output the simulation made while they trained.
//   mpirun -np 3 ./app WORKDIR
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <noeira/noeira.hpp>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr int kGrid = 20;       // the plate, kGrid x kGrid, edges held at 0
constexpr float kAlpha = 0.2f;  // diffusion number (explicit steps are stable below 0.25)
// The surrogate: a point's 3x3 neighbourhood now -> the point's next value.
using Surrogate = noeira::Sequential<noeira::LinearTanh<9, 32>, noeira::Linear<32, 1>>;

// Steps the plate from a fresh random heating (rank 0); every interior point's neighbourhood and
// next value, x [n, 9] and y [n, 1], reach every rank of the world. Collective.
void simulate(int steps, unsigned seed, std::vector<float>& x, std::vector<float>& y) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  x.assign(static_cast<std::size_t>(steps) * (kGrid - 2) * (kGrid - 2) * 9, 0.0f);
  y.assign(x.size() / 9, 0.0f);
  if (rank == 0) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> heat(0.0f, 1.0f);
    std::vector<float> u(kGrid * kGrid, 0.0f), next(u);
    for (int i = 1; i < kGrid - 1; ++i)
      for (int j = 1; j < kGrid - 1; ++j) u[i * kGrid + j] = heat(rng) * heat(rng);
    std::size_t at = 0;
    for (int s = 0; s < steps; ++s, u.swap(next)) {
      for (int c = kGrid + 1; c < kGrid * (kGrid - 1) - 1; ++c) {
        if (c % kGrid == 0 || c % kGrid == kGrid - 1) continue;
        for (int di = -1; di <= 1; ++di)
          for (int dj = -1; dj <= 1; ++dj) x[at * 9 + 3 * di + dj + 4] = u[c + di * kGrid + dj];
        next[c] = u[c] + kAlpha * (u[c - 1] + u[c + 1] + u[c - kGrid] + u[c + kGrid] - 4 * u[c]);
        y[at++] = next[c];
      }
    }
  }
  MPI_Bcast(x.data(), static_cast<int>(x.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  MPI_Bcast(y.data(), static_cast<int>(y.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
}

// The program's arrays as NAME_x and NAME_y, read in place by noeira.
void provide(const std::string& name, const std::vector<float>& x, const std::vector<float>& y) {
  const auto rows = static_cast<std::int64_t>(y.size());
  noeira::io::provide_array(name + "_x", noeira::io::memory_array(std::span(x), {rows, 9}));
  noeira::io::provide_array(name + "_y", noeira::io::memory_array(std::span(y), {rows, 1}));
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);  // the simulation's MPI: noeira neither initializes nor finalizes it
  int rank = 0, status = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm trainers;  // ranks 1 and 2; the simulation (rank 0) is in a group of its own
  MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? 0 : 1, rank, &trainers);
  std::vector<float> x, y, test_x, test_y, fresh_x, fresh_y;
  simulate(12, 1, x, y);
  simulate(4, 2, test_x, test_y);
  if (rank == 0) {
    simulate(6, 3, fresh_x, fresh_y);  // the simulation steps on while the others train
  } else {
    try {
      noeira::install_model_catalogue(noeira::ModelCatalogue(
          {noeira::model_entry<Surrogate>("heat-surrogate", "3x3 stencil -> next value")}));
      provide("train", x, y);
      provide("test", test_x, test_y);
      noeira::TrainConfig cfg;  // what `noeira train` flags say, typed in
      cfg.model = "heat-surrogate";
      cfg.data = noeira::DatasetKind::Arrays;
      cfg.train_x = "memory:train_x", cfg.train_y = "memory:train_y";
      cfg.test_x = "memory:test_x", cfg.test_y = "memory:test_y";
      cfg.epochs = 30, cfg.batch = 64, cfg.lr = 1e-2;
      cfg.policy = noeira::dist::Policy::Zero3;
      cfg.out = std::string(argc > 1 ? argv[1] : ".") + "/run";
      noeira::Trainer trainer(cfg, trainers);
      for (int epochs = 0; epochs < 30; epochs += 10) {
        trainer.fit(10);
        const noeira::EvalResult r = trainer.evaluate();
        if (rank == 1) std::printf("epoch %d: test r2 %.4f\n", epochs + 10, r.r2);
      }
      simulate(6, 3, fresh_x, fresh_y);  // what the simulation made meanwhile
      provide("test", fresh_x, fresh_y);
      const noeira::EvalResult r = trainer.evaluate();
      if (rank == 1) {
        std::printf("surrogate on fresh simulation output: rmse %.3g, r2 %.4f (%lld points)\n",
                    r.rmse, r.r2, static_cast<long long>(r.samples));
      }
      status = r.r2 > 0.9 ? 0 : 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "in_situ_surrogate: error: %s\n", e.what());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  MPI_Comm_free(&trainers);
  MPI_Finalize();
  return status;
}
