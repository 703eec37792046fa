#pragma once
// Whether the ranks of a real-process job were started alike. mpirun can start each rank with its
// own command line (`mpirun -np 1 noeira train ... : -np 1 noeira train ... --seed 5`), and ranks
// that disagree on the model, the policy or the batch post collectives that do not match (a raw
// MPI error or a segmentation fault), while another seed or learning rate trains silently to
// nonsense. So every rank checks its settings against its peers' before anything depends on
// them: one allreduce of a hash when they agree (the only cost of a good run), and only on a
// mismatch an exchange of the settings themselves, to name the first that differs.
//
// The check is the first collective of the job and has the same shape on every rank whatever its
// settings, so a disagreement cannot make the check itself fail.
#include <mpi.h>

#include <exception>
#include <span>
#include <string>
#include <vector>

namespace noeira::dist {

// One thing every rank must agree on: e.g. {"--seed", "1"}.
struct Setting {
  std::string name;
  std::string value;
};

// Collective over `comm`. Returns when every rank holds the same settings (names and values, in
// the same order); otherwise throws, on every rank alike, an AgreedError naming the first setting
// that differs and the ranks, e.g.
//   ranks disagree on --seed: rank 0 has '1', rank 1 has '5' (start every rank with the same
//   options and data)
// A name a rank does not have reads "(not set)" there.
void check_ranks_agree(MPI_Comm comm, std::span<const Setting> settings);

// The message of a disagreement, from every rank's settings (index = rank); empty when they agree.
std::string first_disagreement(std::span<const std::vector<Setting>> by_rank);

// Collective over `comm`: the outcome of a step every rank ran, made everyone's. `failure` is
// this rank's error message, or null when its step succeeded. Returns when every rank succeeded;
// otherwise throws, on every rank alike, an AgreedError with the message of the lowest failing
// rank ("rank r: " before it unless every rank failed): rank 0 says it once, nobody waits for a
// peer that will never come, and the job ends without MPI_Abort and one line per rank.
void agree_on_outcome(MPI_Comm comm, const std::string* failure);

// Runs `step` on this rank and agrees on the outcome (agree_on_outcome): a refusal that every
// rank of a job reaches alike — a bad option, a missing file — is said once. Collective; `step`
// itself must post no collective (a rank that failed before it would leave the others waiting).
template <class Step>
void agree_on_success(MPI_Comm comm, Step&& step) {
  std::string failure;
  bool failed = false;
  try {
    step();
  } catch (const std::exception& e) {
    failure = e.what();
    failed = true;
  }
  agree_on_outcome(comm, failed ? &failure : nullptr);
}

}  // namespace noeira::dist
