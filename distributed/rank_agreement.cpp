#include "distributed/rank_agreement.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>

#include "core/hash.hpp"
#include "distributed/mpi_check.hpp"
#include "kernels/error.hpp"

namespace noeira::dist {

namespace {

// Names and values with a NUL after each: neither a name nor a value holds one (they come from a
// command line), so the form is unambiguous and its hash tells any two lists apart.
std::string serialize(std::span<const Setting> settings) {
  std::string s;
  for (const Setting& e : settings) {
    s += e.name;
    s += '\0';
    s += e.value;
    s += '\0';
  }
  return s;
}

std::vector<Setting> deserialize(std::string_view s) {
  std::vector<Setting> out;
  while (!s.empty()) {
    const std::size_t a = s.find('\0');
    const std::size_t b = a == std::string_view::npos ? a : s.find('\0', a + 1);
    if (b == std::string_view::npos) break;  // a malformed tail: nothing more to compare
    out.push_back({std::string(s.substr(0, a)), std::string(s.substr(a + 1, b - a - 1))});
    s.remove_prefix(b + 1);
  }
  return out;
}

// A value as a message shows it: quoted, and cut short so that a long one keeps the line short.
std::string shown(const std::optional<std::string>& value) {
  if (!value) return "(not set)";
  constexpr std::size_t kMax = 60;
  std::string v = value->size() > kMax ? value->substr(0, kMax) + "..." : *value;
  return "'" + v + "'";
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

}  // namespace

std::string first_disagreement(std::span<const std::vector<Setting>> by_rank) {
  // Every name any rank has, in the order the first rank holding it lists them.
  std::vector<std::string> names;
  for (const std::vector<Setting>& settings : by_rank) {
    for (const Setting& e : settings) {
      if (std::find(names.begin(), names.end(), e.name) == names.end()) names.push_back(e.name);
    }
  }
  for (const std::string& name : names) {
    // Distinct values in order of their first rank, with the ranks holding each.
    std::vector<std::pair<std::optional<std::string>, std::vector<int>>> groups;
    for (std::size_t r = 0; r < by_rank.size(); ++r) {
      std::optional<std::string> value;
      for (const Setting& e : by_rank[r]) {
        if (e.name == name) value = e.value;
      }
      auto it = std::find_if(groups.begin(), groups.end(),
                             [&](const auto& g) { return g.first == value; });
      if (it == groups.end()) {
        groups.push_back({value, {}});
        it = groups.end() - 1;
      }
      it->second.push_back(static_cast<int>(r));
    }
    if (groups.size() < 2) continue;
    std::string message = "ranks disagree on " + name + ":";
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const bool one = groups[g].second.size() == 1;
      message += (g ? ", " : " ") + rank_list(groups[g].second) + (one ? " has " : " have ") +
                 shown(groups[g].first);
    }
    return message + " (start every rank with the same options and data)";
  }
  return {};
}

void check_ranks_agree(MPI_Comm comm, std::span<const Setting> settings) {
  const std::string mine = serialize(settings);
  // Equal everywhere iff the largest hash equals the smallest: max of {h, ~h} gives both in one
  // allreduce of a fixed shape.
  const std::uint64_t h = fnv1a(mine);
  std::uint64_t extremes[2] = {h, ~h};
  NOEIRA_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, extremes, 2, MPI_UINT64_T, MPI_MAX, comm));
  if (extremes[0] == ~extremes[1]) return;

  // A mismatch: every rank gathers every rank's settings and finds the same first difference.
  int size = 1;
  NOEIRA_MPI_CHECK(MPI_Comm_size(comm, &size));
  const int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<std::size_t>(size));
  NOEIRA_MPI_CHECK(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm));
  std::vector<int> offsets(static_cast<std::size_t>(size), 0);
  for (std::size_t r = 1; r < offsets.size(); ++r) offsets[r] = offsets[r - 1] + lengths[r - 1];
  std::string all(static_cast<std::size_t>(offsets.back() + lengths.back()), '\0');
  NOEIRA_MPI_CHECK(MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(),
                                  offsets.data(), MPI_CHAR, comm));
  std::vector<std::vector<Setting>> by_rank;
  for (std::size_t r = 0; r < offsets.size(); ++r) {
    by_rank.push_back(deserialize(std::string_view(all).substr(
        static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(lengths[r]))));
  }
  const std::string message = first_disagreement(by_rank);
  // Equal lists with unequal hashes cannot happen; say so rather than pass silently.
  throw AgreedError(message.empty() ? "ranks disagree on their settings" : message);
}

void agree_on_outcome(MPI_Comm comm, const std::string* failure) {
  int failed = failure != nullptr ? 1 : 0;
  int failures = 0;
  NOEIRA_MPI_CHECK(MPI_Allreduce(&failed, &failures, 1, MPI_INT, MPI_SUM, comm));
  if (failures == 0) return;
  int rank = 0;
  int size = 1;
  NOEIRA_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  NOEIRA_MPI_CHECK(MPI_Comm_size(comm, &size));
  int mine = failed != 0 ? rank : size;
  int first = size;
  NOEIRA_MPI_CHECK(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm));
  // The first failing rank's message, cut to a line's worth: it travels to every rank.
  constexpr std::size_t kMaxMessage = 4096;
  std::string message = rank == first ? failure->substr(0, kMaxMessage) : std::string();
  int length = static_cast<int>(message.size());
  NOEIRA_MPI_CHECK(MPI_Bcast(&length, 1, MPI_INT, first, comm));
  message.resize(static_cast<std::size_t>(length));
  NOEIRA_MPI_CHECK(MPI_Bcast(message.data(), length, MPI_CHAR, first, comm));
  throw AgreedError(failures == size ? message
                                     : detail::concat("rank ", first, ": ", message));
}

}  // namespace noeira::dist
