#include "engine/error_list.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fuserank::engine {

void ErrorList::Add(absl::string_view key, absl::string_view reason) {
  lines_.push_back(file_.empty() ? absl::StrCat(key, ": ", reason)
                                 : absl::StrCat(file_, ": ", key, ": ", reason));
}

void ErrorList::AddLine(absl::string_view problem) {
  lines_.push_back(file_.empty() ? std::string(problem) : absl::StrCat(file_, ": ", problem));
}

absl::Status ErrorList::ToStatus(absl::string_view separator) const {
  if (lines_.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(lines_, separator));
}

}  // namespace fuserank::engine
