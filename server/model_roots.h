// The directories model files may be loaded from by a reload (model.roots): a spec named by
// Admin ReloadModel, and the weights file any spec names, must resolve (realpath: every
// symlink followed, "..", "." removed) to a path inside one of them, so a reload can read
// neither files elsewhere on the host nor escape through a symlink. The roots themselves
// are resolved at each check, so a root that is a symlink (a directory switched by `ln -sfn`)
// follows its current target. Immutable after construction; thread-safe.
#ifndef FUSERANK_SERVER_MODEL_ROOTS_H_
#define FUSERANK_SERVER_MODEL_ROOTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/config.h"

namespace fuserank::server {

class ModelRoots {
 public:
  // No roots: every path is refused (a server without model files).
  ModelRoots() = default;
  explicit ModelRoots(std::vector<std::string> roots) : roots_(std::move(roots)) {}

  // model.roots of `config`, or, when empty, the directories of every configured model's
  // spec and of the weights file each names (read from the specs), and of the files they
  // resolve to where either is a symlink into another directory.
  static ModelRoots FromConfig(const Config& config);

  // The resolved path of `path` when it lies inside a root. NOT_FOUND when it cannot be
  // resolved (it or a directory on the way does not exist), PERMISSION_DENIED when it lies
  // outside every root (the message lists the roots). `what` ("model spec", "weights")
  // starts the message.
  absl::StatusOr<std::string> Confine(const std::string& path, absl::string_view what) const;

  const std::vector<std::string>& roots() const { return roots_; }

 private:
  std::vector<std::string> roots_;  // as configured
};

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_MODEL_ROOTS_H_
