#pragma once
// What each sharding policy shards, as data computed once (docs/design.md, "The sharding policy in rooms"): for each of the
// three kinds of per-parameter state, whether a rank keeps the whole of it or only its slice of
// every unit. The store, the reducer, the optimizer step and the memory accounting all read
// these three facts instead of branching on the policy at every use.
//
//            params  grads  optimizer state
//   ddp      full    full   full
//   zero1    full    full   slice
//   zero2    full    slice  slice   (one unit's full gradient transiently, during its vjp)
//   zero3    slice   slice  slice   (one unit's full values transiently, while it runs)
//
// The optimizer-state extent is also what a rank updates: the whole of every unit (DDP) or its
// slice (ZeRO), with the gradients reduced there.
#include <cstdint>
#include <string_view>

#include "core/names.hpp"

namespace noeira::dist {

enum class Policy : std::uint8_t { Ddp, Zero1, Zero2, Zero3 };

inline constexpr NameTable<Policy, 4> kPolicyNames{{{{Policy::Ddp, "ddp"},
                                                     {Policy::Zero1, "zero1"},
                                                     {Policy::Zero2, "zero2"},
                                                     {Policy::Zero3, "zero3"}}},
                                                   "policy"};

// "ddp", "zero1", "zero2", "zero3"; anything else is an InputError listing them.
inline Policy parse_policy(std::string_view name) { return kPolicyNames.parse(name); }
inline std::string_view to_string(Policy policy) { return kPolicyNames.name_of(policy); }

// How much of one kind of state a rank keeps.
enum class Extent : std::uint8_t { Full, Slice };

struct Residency {
  Extent params = Extent::Full;
  Extent grads = Extent::Full;
  Extent state = Extent::Full;  // and the range a rank updates
};

constexpr Residency residency_of(Policy policy) {
  switch (policy) {
    case Policy::Ddp: return {Extent::Full, Extent::Full, Extent::Full};
    case Policy::Zero1: return {Extent::Full, Extent::Full, Extent::Slice};
    case Policy::Zero2: return {Extent::Full, Extent::Slice, Extent::Slice};
    case Policy::Zero3: return {Extent::Slice, Extent::Slice, Extent::Slice};
  }
  return {};
}

}  // namespace noeira::dist
