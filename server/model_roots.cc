#include "server/model_roots.h"

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/escape_text.h"
#include "server/model_files.h"

namespace fuserank::server {
namespace {

bool Inside(absl::string_view path, absl::string_view root) {
  if (root == "/") return true;
  return path == root || (absl::StartsWith(path, root) && path[root.size()] == '/');
}

}  // namespace

ModelRoots ModelRoots::FromConfig(const Config& config) {
  if (!config.model_roots.empty()) return ModelRoots(config.model_roots);
  std::vector<std::string> roots;
  auto add = [&](std::string dir) {
    for (const std::string& root : roots) {
      if (root == dir) return;
    }
    roots.push_back(std::move(dir));
  };
  // Each path's directory and, when the file itself is a symlink into another directory
  // (a Hugging Face cache's snapshots/ -> blobs/), its target's: Confine checks resolved
  // paths. A directory symlink is not frozen into its current target (roots are resolved
  // at each check, so it follows a switch).
  auto add_file = [&](const std::string& path) {
    const std::string dir = ParentDirectory(path);
    add(dir);
    absl::StatusOr<std::string> resolved = ResolvePath(path);
    absl::StatusOr<std::string> resolved_dir = ResolvePath(dir);
    if (resolved.ok() && resolved_dir.ok() && ParentDirectory(*resolved) != *resolved_dir) {
      add(ParentDirectory(*resolved));
    }
  };
  for (const ModelConfig& model : config.models) {
    add_file(model.path);
    // The weights as the loader reads the spec (resolved) and the watch names them. A spec
    // that does not parse adds no weights directory: loading it reports why.
    absl::StatusOr<std::string> weights = NamedWeightsPath(model.path);
    if (weights.ok()) add_file(*weights);
  }
  return ModelRoots(std::move(roots));
}

absl::StatusOr<std::string> ModelRoots::Confine(const std::string& path,
                                                absl::string_view what) const {
  const std::string shown = engine::EscapeText(path);
  absl::StatusOr<std::string> resolved = ResolvePath(path);
  if (!resolved.ok()) {
    return absl::NotFoundError(
        absl::StrCat(what, " '", shown, "' cannot be resolved: ", resolved.status().message()));
  }
  for (const std::string& root : roots_) {
    absl::StatusOr<std::string> resolved_root = ResolvePath(root);
    if (resolved_root.ok() && Inside(*resolved, *resolved_root)) return *resolved;
  }
  return absl::PermissionDeniedError(absl::StrCat(
      what, " '", shown, "' (", engine::EscapeText(*resolved), ") is outside the model roots: ",
      roots_.empty() ? "none" : absl::StrJoin(roots_, ", "), " (model.roots)"));
}

}  // namespace fuserank::server
