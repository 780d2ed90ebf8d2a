#include "engine/error_list.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fuserank::engine {

bool ErrorList::Full() {
  if (lines_.size() < kMaxErrorLines) return false;
  ++dropped_;
  return true;
}

void ErrorList::Add(absl::string_view key, absl::string_view reason) {
  if (Full()) return;
  lines_.push_back(file_.empty() ? absl::StrCat(key, ": ", reason)
                                 : absl::StrCat(file_, ": ", key, ": ", reason));
}

void ErrorList::AddLine(absl::string_view problem) {
  if (Full()) return;
  lines_.push_back(file_.empty() ? std::string(problem) : absl::StrCat(file_, ": ", problem));
}

absl::Status ErrorList::ToStatus(absl::string_view separator) const {
  if (lines_.empty()) return absl::OkStatus();
  std::string text = absl::StrJoin(lines_, separator);
  if (dropped_ > 0) absl::StrAppend(&text, separator, "... and ", dropped_, " more");
  return absl::InvalidArgumentError(text);
}

}  // namespace fuserank::engine
