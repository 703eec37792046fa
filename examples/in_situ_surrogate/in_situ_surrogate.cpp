// In situ: a 2-D heat equation keeps stepping on one MPI rank while two others, on a communicator
// of their own, train a surrogate of its update on the snapshots it wrote, then check the
// surrogate against output the simulation made while they trained.  mpirun -np 3 ./app WORKDIR
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <noeira/noeira.hpp>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr int kGrid = 20;         // the plate, kGrid x kGrid, edges held at 0
constexpr float kAlpha = 0.2f;    // diffusion number (explicit steps are stable below 0.25)
// The surrogate: a point's 3x3 neighbourhood now -> the point's next value.
using Surrogate = noeira::Sequential<noeira::LinearTanh<9, 32>, noeira::Linear<32, 1>>;

void save_npy(const std::string& path, const std::vector<float>& v, std::size_t cols) {
  std::string h = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                  std::to_string(v.size() / cols) + ", " + std::to_string(cols) + "), }";
  h += std::string((64 - (10 + h.size() + 1) % 64) % 64, ' ') + '\n';
  std::ofstream out(path, std::ios::binary);
  out << "\x93NUMPY" << '\1' << '\0' << static_cast<char>(h.size() & 0xff)
      << static_cast<char>(h.size() >> 8) << h;
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(4 * v.size()));
}

// Steps the plate `steps` times from a fresh random heating; writes every interior point's
// neighbourhood and next value as DIR/<split>_x.npy and <split>_y.npy.
void simulate(const std::string& dir, const std::string& split, int steps, unsigned seed) {
  std::filesystem::create_directories(dir);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> heat(0.0f, 1.0f);
  std::vector<float> u(kGrid * kGrid, 0.0f), next(u), x, y;
  for (int i = 1; i < kGrid - 1; ++i)
    for (int j = 1; j < kGrid - 1; ++j) u[i * kGrid + j] = heat(rng) * heat(rng);
  for (int s = 0; s < steps; ++s) {
    for (int i = 1; i < kGrid - 1; ++i) {
      for (int j = 1; j < kGrid - 1; ++j) {
        const int c = i * kGrid + j;
        for (int di = -1; di <= 1; ++di)
          for (int dj = -1; dj <= 1; ++dj) x.push_back(u[c + di * kGrid + dj]);
        next[c] = u[c] + kAlpha * (u[c - 1] + u[c + 1] + u[c - kGrid] + u[c + kGrid] - 4 * u[c]);
        y.push_back(next[c]);
      }
    }
    u.swap(next);
  }
  save_npy(dir + "/" + split + "_x.npy", x, 9);
  save_npy(dir + "/" + split + "_y.npy", y, 1);
}

// The trainers' part: the surrogate trained over `trainers` (ranks 1 and 2), then judged by rank 1
// on the output the simulation wrote meanwhile. Returns the exit status.
int train_and_judge(const std::string& work, MPI_Comm trainers, int rank) {
  noeira::install_model_catalogue(noeira::ModelCatalogue(
      {noeira::model_entry<Surrogate>("heat-surrogate", "3x3 stencil -> next value")}));
  noeira::TrainConfig cfg;  // what `noeira train` flags say, typed in
  cfg.model = "heat-surrogate";
  cfg.data = noeira::DatasetKind::Npy;
  cfg.data_dir = work + "/data";
  cfg.epochs = 30;
  cfg.batch = 64;
  cfg.lr = 1e-2;
  cfg.policy = noeira::dist::Policy::Zero3;
  cfg.out = work + "/run";
  MPI_Barrier(MPI_COMM_WORLD);  // the simulation's snapshots are written
  (void)noeira::run_train(cfg, trainers);
  MPI_Barrier(MPI_COMM_WORLD);  // and its fresh output
  if (rank != 1) return 0;
  cfg.model.clear();  // eval: the model model.h5 names
  cfg.params = cfg.out + "/model.h5";
  cfg.data_dir = work + "/fresh";
  const noeira::EvalResult r = noeira::run_eval(cfg);
  std::printf("surrogate on fresh simulation output: rmse %.3g, r2 %.4f (%lld points)\n",
              std::sqrt(r.loss), r.r2, static_cast<long long>(r.samples));
  return r.r2 > 0.9 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);  // the simulation's MPI: noeira neither initializes nor finalizes it
  int rank = 0, status = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::string work = argc > 1 ? argv[1] : ".";
  MPI_Comm trainers;  // ranks 1 and 2; the simulation (rank 0) is in a group of its own
  MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? 0 : 1, rank, &trainers);
  if (rank == 0) {
    simulate(work + "/data", "train", 12, 1);
    simulate(work + "/data", "test", 4, 2);
    MPI_Barrier(MPI_COMM_WORLD);              // training starts ...
    simulate(work + "/fresh", "test", 6, 3);  // ... while the simulation steps on
    MPI_Barrier(MPI_COMM_WORLD);
  } else {
    try {
      status = train_and_judge(work, trainers, rank);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "in_situ_surrogate: error: %s\n", e.what());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  MPI_Comm_free(&trainers);
  MPI_Finalize();
  return status;
}
