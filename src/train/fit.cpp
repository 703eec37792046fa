#include "train/fit.hpp"

#include <unistd.h>

#include <system_error>

#include "distributed/mpi_check.hpp"
#include "distributed/mpi_process_group.hpp"
#include "distributed/rank_agreement.hpp"
#include "io/checkpoint.hpp"
#include "train/checkpointing.hpp"
#include "train/saved_model.hpp"

namespace noeira {

namespace {

namespace fs = std::filesystem;

// The trainer's own duplicate of the ranks' communicator (its broadcasts and agreements never
// match the caller's messages), or MPI_COMM_NULL for one process.
MPI_Comm duplicate_ranks(MPI_Comm given) {
  if (given == MPI_COMM_NULL) return MPI_COMM_NULL;
  require_callers_mpi("Trainer over MPI ranks");
  MPI_Comm dup = MPI_COMM_NULL;
  NOEIRA_MPI_CHECK(MPI_Comm_dup(given, &dup));
  return dup;
}

// Under an MPI launcher the ranks are its processes; otherwise this one.
MPI_Comm launched_ranks() {
  return dist::MpiRuntime::launched_by_mpi() ? MPI_COMM_WORLD : MPI_COMM_NULL;
}

// A runs/<model>-<data>-<time> that does not exist yet, rank 0's choice on every rank.
std::string new_out_dir(const TrainConfig& cfg, MPI_Comm comm) {
  std::string out;
  int rank = 0;
  if (comm != MPI_COMM_NULL) NOEIRA_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  if (rank == 0) {
    const std::string base = default_out_dir(cfg);
    out = base;
    std::error_code ec;
    for (int n = 2; fs::exists(out, ec); ++n) out = detail::concat(base, "-", n);
  }
  if (comm == MPI_COMM_NULL) return out;
  int size = static_cast<int>(out.size());
  NOEIRA_MPI_CHECK(MPI_Bcast(&size, 1, MPI_INT, 0, comm));
  out.resize(static_cast<std::size_t>(size));
  NOEIRA_MPI_CHECK(MPI_Bcast(out.data(), size, MPI_CHAR, 0, comm));
  return out;
}

// Runs `step` on every rank, a refusal said alike on all (one process: just runs it).
template <class Step>
void on_every_rank(MPI_Comm comm, Step&& step) {
  if (comm == MPI_COMM_NULL) {
    step();
  } else {
    dist::agree_on_success(comm, step);
  }
}

bool is_rank_zero(MPI_Comm comm) {
  int rank = 0;
  if (comm != MPI_COMM_NULL) NOEIRA_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  return rank == 0;
}

// Copies the checkpoint `from` into the new directory `to` through a temporary sibling renamed
// at the end, so that `to` never holds half a checkpoint.
void copy_checkpoint(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  if (fs::exists(to, ec) && !(fs::is_directory(to, ec) && fs::is_empty(to, ec))) {
    throw InputError(detail::concat("Trainer::save: ", to.string(),
                                    " exists and is not an empty directory; give a new one"));
  }
  const fs::path parent = to.has_parent_path() ? to.parent_path() : fs::path(".");
  fs::create_directories(parent, ec);
  const fs::path tmp = parent / detail::concat(".", to.filename().string(), ".tmp-", ::getpid());
  fs::remove_all(tmp, ec);
  fs::copy(from, tmp, fs::copy_options::recursive, ec);
  if (!ec) {
    fs::remove(to, ec);  // the empty directory, if there is one
    fs::rename(tmp, to, ec);
  }
  if (ec) {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    throw InputError(detail::concat("Trainer::save: cannot write ", to.string(), " (",
                                    ec.message(), ")"));
  }
}

}  // namespace

Trainer::Trainer(TrainConfig options, TrainCallbacks callbacks)
    : Trainer(std::move(options), launched_ranks(), std::move(callbacks)) {}

Trainer::Trainer(TrainConfig options, MPI_Comm comm, TrainCallbacks callbacks)
    : cfg_(std::move(options)), callbacks_(std::move(callbacks)) {
  if (comm != MPI_COMM_NULL && cfg_.sim_ranks > 0) {
    throw InputError(detail::concat("Trainer: --sim-ranks ", cfg_.sim_ranks,
                                    " with MPI ranks: the ranks are the communicator's"));
  }
  comm_ = duplicate_ranks(comm);
  try {
    if (cfg_.out.empty()) cfg_.out = new_out_dir(cfg_, comm_);
    if (cfg_.checkpoint_dir.empty()) {
      cfg_.checkpoint_dir = (fs::path(cfg_.out) / "checkpoints").string();
    }
    if (!cfg_.resume.empty()) {
      on_every_rank(comm_, [&] { state_ = io::resolve_checkpoint(resume_path(cfg_)); });
      cfg_.resume.clear();
    }
  } catch (...) {
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
    throw;
  }
}

Trainer::~Trainer() {
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

TrainOutcome Trainer::fit(std::int64_t periods) {
  if (periods <= 0) {
    throw InputError(detail::concat("Trainer::fit: ", periods, " periods; give at least 1"));
  }
  TrainConfig run = cfg_;
  run.periods_this_run = periods;
  run.resume = state_.string();
  // A state loaded from elsewhere replaces the checkpoints this trainer wrote.
  std::error_code ec;
  if (wrote_checkpoints_ && !state_.empty() &&
      !fs::equivalent(state_.parent_path(), cfg_.checkpoint_dir, ec)) {
    run.overwrite_checkpoints = true;
  }
  TrainOutcome outcome = comm_ == MPI_COMM_NULL ? run_train(run, callbacks_)
                                                : run_train(run, comm_, callbacks_);
  wrote_checkpoints_ = true;
  if (const auto latest = io::latest_checkpoint(cfg_.checkpoint_dir)) state_ = *latest;
  return outcome;
}

EvalResult Trainer::evaluate() const {
  if (state_.empty()) {
    throw InputError("Trainer::evaluate: no state yet (fit or load first)");
  }
  TrainConfig eval = cfg_;
  eval.params.clear();
  eval.eval_checkpoint = state_.string();
  return run_eval(eval);
}

void Trainer::save(const fs::path& dir) const {
  if (state_.empty()) throw InputError("Trainer::save: no state yet (fit or load first)");
  on_every_rank(comm_, [&] {
    if (is_rank_zero(comm_)) copy_checkpoint(state_, dir);
  });
}

void Trainer::load(const fs::path& path) {
  fs::path loaded;
  on_every_rank(comm_, [&] {
    loaded = io::resolve_checkpoint(path);
    TrainConfig named;
    named.model.clear();  // none given: the one the checkpoint names
    named.eval_checkpoint = loaded.string();
    const std::string model = SavedModel::open(named).model();
    if (model != cfg_.model) {
      throw InputError(detail::concat("Trainer::load: ", loaded.string(), " holds model '", model,
                                      "', this trainer's is '", cfg_.model, "'"));
    }
  });
  state_ = loaded;
}

}  // namespace noeira
