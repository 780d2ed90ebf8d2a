// The models a server serves, each with its decoder, backend and batcher, looked up by the
// request's `model` field. Built once at start, then read-only (Find() is thread-safe).
#ifndef FUSERANK_SERVER_SERVED_MODELS_H_
#define FUSERANK_SERVER_SERVED_MODELS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/backend.h"
#include "engine/batcher.h"
#include "engine/model.h"
#include "server/request_decoder.h"

namespace fuserank::server {

// One served model. Members are destroyed batcher first (it calls into the backend).
struct ServedModel {
  std::string name;  // what requests put in `model`
  std::shared_ptr<const engine::Model> model;
  std::unique_ptr<RequestDecoder> decoder;
  std::unique_ptr<engine::Backend> backend;
  std::unique_ptr<engine::Batcher> batcher;

  ~ServedModel();
};

class ServedModels {
 public:
  // The first model added is the default (an empty `model` in a request).
  // ALREADY_EXISTS when the name is taken.
  absl::Status Add(std::unique_ptr<ServedModel> model);
  // "" -> the default model; an unknown name: NOT_FOUND naming the loaded models.
  absl::StatusOr<ServedModel*> Find(absl::string_view name) const;
  const std::vector<std::unique_ptr<ServedModel>>& all() const { return models_; }
  // Requests waiting in every model's batcher queue.
  int QueueDepth() const;
  // Stops every batcher: queued requests complete, new ones get UNAVAILABLE.
  void ShutdownBatchers();

 private:
  std::vector<std::unique_ptr<ServedModel>> models_;
  absl::flat_hash_map<std::string, ServedModel*> by_name_;
};

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_SERVED_MODELS_H_
