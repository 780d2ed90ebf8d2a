#include "server/input_changes.h"

#include <utility>
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

// Tables of both specs whose ids `after` refuses where `before` took them: oov: reject
// where it was modulo, or fewer rows under reject.
std::vector<std::string> Stricter(const engine::ModelSpec& before, const engine::ModelSpec& after) {
  std::vector<std::string> stricter;
  for (const engine::TableSpec& b : before.tables) {
    for (const engine::TableSpec& a : after.tables) {
      if (a.name != b.name || a.side != b.side || a.oov != engine::Oov::kReject || a.remote()) {
        continue;
      }
      if (b.remote() || b.oov != engine::Oov::kReject) {
        stricter.push_back(absl::StrCat(a.name, " refuses ids outside [0, ", a.rows,
                                        ") (oov: reject; was ",
                                        b.remote() ? "storage: redis" : "modulo", ")"));
      } else if (a.rows < b.rows) {
        stricter.push_back(
            absl::StrCat(a.name, " refuses ids from ", a.rows, " (was ", b.rows, ", oov: reject)"));
      }
    }
  }
  return stricter;
}

}  // namespace

std::string InputChanges(const engine::ModelSpec& before, const engine::ModelSpec& after) {
  std::vector<std::string> changes;
  const std::vector<std::string> gone = Missing(before, after);
  const std::vector<std::string> added = Missing(after, before);
  if (!gone.empty()) changes.push_back(absl::StrCat("tables gone: ", absl::StrJoin(gone, ", ")));
  if (!added.empty()) changes.push_back(absl::StrCat("new tables: ", absl::StrJoin(added, ", ")));
  for (std::string& change : Stricter(before, after)) changes.push_back(std::move(change));
  if (before.dense_user != after.dense_user) {
    changes.push_back(absl::StrCat("user dense ", before.dense_user, " -> ", after.dense_user));
  }
  if (before.dense_item != after.dense_item) {
    changes.push_back(absl::StrCat("item dense ", before.dense_item, " -> ", after.dense_item));
  }
  return absl::StrJoin(changes, "; ");
}

}  // namespace fuserank::server
