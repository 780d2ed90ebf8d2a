#include "server/input_changes.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fuserank::server {
namespace {

bool Has(const engine::ModelSpec& spec, const engine::TableSpec& table) {
  for (const engine::TableSpec& t : spec.tables) {
    if (t.name == table.name && t.side == table.side) return true;
  }
  return false;
}

// The tables of `from` that `other` lacks, as "name (side)".
std::vector<std::string> Missing(const engine::ModelSpec& from, const engine::ModelSpec& other) {
  std::vector<std::string> missing;
  for (const engine::TableSpec& t : from.tables) {
    if (!Has(other, t)) {
      missing.push_back(
          absl::StrCat(t.name, t.side == engine::Side::kUser ? " (user)" : " (item)"));
    }
  }
  return missing;
}

}  // namespace

std::string InputChanges(const engine::ModelSpec& before, const engine::ModelSpec& after) {
  std::vector<std::string> changes;
  const std::vector<std::string> gone = Missing(before, after);
  const std::vector<std::string> added = Missing(after, before);
  if (!gone.empty()) changes.push_back(absl::StrCat("tables gone: ", absl::StrJoin(gone, ", ")));
  if (!added.empty()) changes.push_back(absl::StrCat("new tables: ", absl::StrJoin(added, ", ")));
  if (before.dense_user != after.dense_user) {
    changes.push_back(absl::StrCat("user dense ", before.dense_user, " -> ", after.dense_user));
  }
  if (before.dense_item != after.dense_item) {
    changes.push_back(absl::StrCat("item dense ", before.dense_item, " -> ", after.dense_item));
  }
  return absl::StrJoin(changes, "; ");
}

}  // namespace fuserank::server
