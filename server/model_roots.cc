#include "server/model_roots.h"

#include <limits.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/escape_text.h"
#include "engine/model_spec.h"

namespace fuserank::server {
namespace {

// realpath(3), or the errno it failed with.
absl::StatusOr<std::string> Resolve(const std::string& path) {
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr) {
    return absl::NotFoundError(std::strerror(errno));
  }
  return std::string(resolved);
}

bool Inside(absl::string_view path, absl::string_view root) {
  if (root == "/") return true;
  return path == root || (absl::StartsWith(path, root) && path[root.size()] == '/');
}

std::string Directory(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
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
  for (const ModelConfig& model : config.models) {
    add(Directory(model.path));
    // A spec that does not parse adds no weights directory: loading it reports why.
    absl::StatusOr<engine::ModelSpec> spec = engine::ParseModelSpecFile(model.path);
    if (spec.ok()) add(Directory(spec->weights_path));
  }
  return ModelRoots(std::move(roots));
}

absl::StatusOr<std::string> ModelRoots::Confine(const std::string& path,
                                                absl::string_view what) const {
  const std::string shown = engine::EscapeText(path);
  absl::StatusOr<std::string> resolved = Resolve(path);
  if (!resolved.ok()) {
    return absl::NotFoundError(
        absl::StrCat(what, " '", shown, "' cannot be resolved: ", resolved.status().message()));
  }
  for (const std::string& root : roots_) {
    absl::StatusOr<std::string> resolved_root = Resolve(root);
    if (resolved_root.ok() && Inside(*resolved, *resolved_root)) return *resolved;
  }
  return absl::PermissionDeniedError(absl::StrCat(
      what, " '", shown, "' (", engine::EscapeText(*resolved), ") is outside the model roots: ",
      roots_.empty() ? "none" : absl::StrJoin(roots_, ", "), " (model.roots)"));
}

}  // namespace fuserank::server
