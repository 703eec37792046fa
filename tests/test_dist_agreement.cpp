// The message of ranks that disagree (distributed/rank_agreement.hpp): the first setting that
// differs, its values grouped by rank, a setting only some ranks have, and nothing when all agree.
// The collective itself runs in tests/ranks_disagree.sh, under mpirun.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "distributed/rank_agreement.hpp"

namespace noeira::dist {
namespace {

TEST(DistAgreement, NamesTheFirstSettingThatDiffersAndItsRanks) {
  const std::vector<Setting> a = {{"--model", "mlp"}, {"--seed", "1"}, {"--lr", "0.001"}};
  const std::vector<Setting> b = {{"--model", "mlp"}, {"--seed", "5"}, {"--lr", "0.002"}};
  EXPECT_EQ(first_disagreement(std::vector<std::vector<Setting>>{a, a, a}), "");
  EXPECT_EQ(first_disagreement(std::vector<std::vector<Setting>>{a, b, a}),
            "ranks disagree on --seed: ranks 0, 2 have '1', rank 1 has '5' (start every rank "
            "with the same options and data)");
  // A setting one rank lacks (another task's option) reads "(not set)" there.
  std::vector<Setting> c = a;
  c.push_back({"--block", "64"});
  EXPECT_EQ(first_disagreement(std::vector<std::vector<Setting>>{a, c}),
            "ranks disagree on --block: rank 0 has (not set), rank 1 has '64' (start every rank "
            "with the same options and data)");
}

}  // namespace
}  // namespace noeira::dist
