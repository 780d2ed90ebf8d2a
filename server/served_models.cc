#include "server/served_models.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fuserank::server {

ServedModel::~ServedModel() {
  batcher.reset();  // joins the threads that call into the backend
  backend.reset();
}

absl::Status ServedModels::Add(std::unique_ptr<ServedModel> model) {
  if (by_name_.contains(model->name)) {
    return absl::AlreadyExistsError(
        absl::StrCat("two models are named '", model->name, "'; give them distinct names"));
  }
  by_name_[model->name] = model.get();
  models_.push_back(std::move(model));
  return absl::OkStatus();
}

absl::StatusOr<ServedModel*> ServedModels::Find(absl::string_view name) const {
  if (name.empty()) {
    if (models_.empty()) return absl::UnavailableError("no model is loaded");
    return models_.front().get();
  }
  auto it = by_name_.find(name);
  if (it != by_name_.end()) return it->second;
  std::vector<absl::string_view> names;
  for (const auto& model : models_) names.push_back(model->name);
  return absl::NotFoundError(absl::StrCat(
      "model '", name, "' is not loaded; loaded models: ", absl::StrJoin(names, ", "),
      " (leave `model` empty for the default, '", names.empty() ? "" : names.front(), "')"));
}

int ServedModels::QueueDepth() const {
  int depth = 0;
  for (const auto& model : models_) depth += model->batcher->queue_depth();
  return depth;
}

void ServedModels::ShutdownBatchers() {
  for (auto& model : models_) {
    if (model->batcher != nullptr) model->batcher->Shutdown();
  }
}

}  // namespace fuserank::server
