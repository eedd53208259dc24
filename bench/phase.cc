// See phase.h.
#include "bench/phase.h"

#include <algorithm>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ckptfs::bench {

absl::string_view PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kSave:
      return "save";
    case Phase::kCommit:
      return "commit";
    case Phase::kLoad:
      return "load";
    case Phase::kBcast:
      return "bcast";
  }
  return "?";
}

absl::StatusOr<std::vector<Phase>> ParsePhases(absl::string_view list) {
  std::vector<Phase> phases;
  for (absl::string_view item : absl::StrSplit(list, ',')) {
    item = absl::StripAsciiWhitespace(item);
    if (item.empty()) continue;
    const Phase* found = nullptr;
    for (const Phase& phase : kAllPhases) {
      if (PhaseName(phase) == item) found = &phase;
    }
    if (found == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown phase \"", item, "\" (phases are save, commit, load, bcast)"));
    }
    if (std::find(phases.begin(), phases.end(), *found) != phases.end()) {
      return absl::InvalidArgumentError(absl::StrCat("phase \"", item, "\" given twice"));
    }
    phases.push_back(*found);
  }
  if (phases.empty()) return absl::InvalidArgumentError("no phase given");
  std::sort(phases.begin(), phases.end());
  return phases;
}

}  // namespace ckptfs::bench
