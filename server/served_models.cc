#include "server/served_models.h"

#include <atomic>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "engine/escape_text.h"
#include "server/guarded_backend.h"
#include "server/input_changes.h"
#include "server/logging.h"
#include "server/version_reaper.h"

namespace fuserank::server {

ServedModel::~ServedModel() {
  batcher.reset();  // joins the threads that call into the backend
  backend.reset();
}

struct ServedModels::Slot {
  std::string name;
  std::atomic<std::shared_ptr<ServedModel>> current;
  absl::Mutex reload_mu;  // one reload of this model at a time; held while loading
  bool shut_down ABSL_GUARDED_BY(reload_mu) = false;
  // Hot-set changes of the serving version, and a reload's hand-over (the new version
  // takes over the serving one's hot sets, then is swapped in): never held while loading.
  absl::Mutex serving_mu ABSL_ACQUIRED_AFTER(reload_mu);
};

ServedModels::ServedModels(VersionLoader loader, Metrics* metrics, VersionCheck check)
    : loader_(std::move(loader)),
      check_(std::move(check)),
      metrics_(metrics),
      reaper_(std::make_shared<VersionReaper>()) {}

ServedModels::~ServedModels() {
  slots_.clear();  // drops the current versions: the reaper destroys them
  reaper_->Stop();
}

std::shared_ptr<ServedModel> ServedModels::Share(std::unique_ptr<ServedModel> version) const {
  return std::shared_ptr<ServedModel>(
      version.release(), [reaper = reaper_](ServedModel* retired) { reaper->Retire(retired); });
}

void ServedModels::RecordInfo(const ServedModel& version) const {
  if (metrics_ == nullptr) return;
  metrics_->SetModelInfo(version.name, version.version(), version.backend->device());
  for (const engine::EmbeddingTable& table : version.model->tables()) metrics_->Table(table.name);
}

absl::Status ServedModels::Load(const std::string& name, const std::string& path, bool is_default) {
  if (loader_ == nullptr) return absl::InternalError("ServedModels has no loader");
  absl::StatusOr<std::unique_ptr<ServedModel>> version = loader_(name, path, nullptr);
  if (!version.ok()) return version.status();
  return Add(std::move(*version), is_default);
}

absl::Status NameTaken(absl::string_view name) {
  return absl::AlreadyExistsError(
      absl::StrCat("two models are named '", name, "'; give them distinct names"));
}

absl::Status ServedModels::Add(std::unique_ptr<ServedModel> model, bool is_default) {
  if (by_name_.contains(model->name)) return NameTaken(model->name);
  if (is_default && default_marked_) {
    return absl::AlreadyExistsError(absl::StrCat("model '", model->name, "' and model '",
                                                 slots_[default_]->name,
                                                 "' are both marked as the default"));
  }
  if (is_default) {
    default_ = slots_.size();
    default_marked_ = true;
  }
  RecordInfo(*model);
  auto slot = std::make_unique<Slot>();
  slot->name = model->name;
  slot->current.store(Share(std::move(model)));
  by_name_[slot->name] = slot.get();
  slots_.push_back(std::move(slot));
  return absl::OkStatus();
}

absl::StatusOr<ServedModels::Slot*> ServedModels::FindSlot(absl::string_view name,
                                                           absl::string_view field) const {
  if (name.empty()) {
    if (slots_.empty()) return absl::UnavailableError("no model is loaded");
    return slots_[default_].get();
  }
  auto it = by_name_.find(name);
  if (it != by_name_.end()) return it->second;
  std::vector<absl::string_view> names;
  for (const auto& slot : slots_) names.push_back(slot->name);
  return absl::NotFoundError(absl::StrCat(
      "model '", LogSafe(name), "' is not loaded; loaded models: ", absl::StrJoin(names, ", "),
      " (leave `", field, "` empty for the default, '", default_name(), "')"));
}

absl::StatusOr<ModelHandle> ServedModels::Acquire(absl::string_view name,
                                                  absl::string_view field) const {
  absl::StatusOr<Slot*> slot = FindSlot(name, field);
  if (!slot.ok()) return slot.status();
  return ModelHandle((*slot)->current.load());
}

absl::Status ServedModels::Refused(const Slot& slot, const std::string& from,
                                   const ServedModel& serving, const absl::Status& why) {
  const absl::StatusCode code = why.code() == absl::StatusCode::kInvalidArgument
                                    ? absl::StatusCode::kInvalidArgument
                                    : absl::StatusCode::kFailedPrecondition;
  return absl::Status(code, absl::StrCat("model '", slot.name, "': the version in '",
                                         engine::EscapeText(from), "' is refused and version '",
                                         serving.version(), "' keeps serving: ", why.message()));
}

absl::StatusOr<ReloadResult> ServedModels::Reload(absl::string_view name, const std::string& path,
                                                  const ServedModel* expected) {
  absl::StatusOr<ReloadResult> result = Swap(name, path, expected);
  if (result.ok() && publish_hook_ != nullptr) publish_hook_();
  return result;
}

absl::StatusOr<ReloadResult> ServedModels::Swap(absl::string_view name, const std::string& path,
                                                const ServedModel* expected) {
  absl::StatusOr<Slot*> found = FindSlot(name);
  if (!found.ok()) return found.status();
  Slot* slot = *found;
  if (check_ != nullptr) {  // refuses bad files at once, holding no lock
    const std::shared_ptr<ServedModel> serving = slot->current.load();
    const std::string from = path.empty() ? serving->path : path;
    if (!from.empty()) {
      const absl::Status checked = check_(slot->name, from);
      if (!checked.ok()) return Refused(*slot, from, *serving, checked);
    }
  }
  absl::MutexLock lock(&slot->reload_mu);
  if (slot->shut_down) return absl::UnavailableError("the server is shutting down");
  std::shared_ptr<ServedModel> old = slot->current.load();
  if (expected != nullptr && old.get() != expected) {
    return absl::AbortedError(absl::StrCat("model '", slot->name, "' was reloaded meanwhile"));
  }
  const std::string from = path.empty() ? old->path : path;
  if (from.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model '", slot->name, "' was not loaded from a file: give the path of a spec"));
  }
  if (loader_ == nullptr) return absl::InternalError("ServedModels has no loader");
  const auto start = std::chrono::steady_clock::now();
  // The new version starts from the old one's hot-row version and sets: freeze them.
  if (old->hot_rows != nullptr) old->hot_rows->PauseRebuilds();
  absl::StatusOr<std::unique_ptr<ServedModel>> fresh = loader_(slot->name, from, old.get());
  if (!fresh.ok()) {
    if (old->hot_rows != nullptr) old->hot_rows->ResumeRebuilds();
    return Refused(*slot, from, *old, fresh.status());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string input_changes = InputChanges(old->model->spec(), (*fresh)->model->spec());
  ReloadResult result;
  result.model = slot->name;
  result.version = (*fresh)->version();
  result.previous_version = old->version();
  // From here a device failure of the old version (a request still finishing on it) leaves
  // the metrics alone: its series is removed below, and the new one's is set now.
  const std::string old_device =
      old->guard != nullptr ? old->guard->Retire() : old->backend->device();
  RecordInfo(**fresh);
  const std::string new_device = (*fresh)->backend->device();
  {
    // Hot-set changes made to the serving version while the new one loaded are taken over
    // before the swap; none can come between the two.
    absl::MutexLock hand_over(&slot->serving_mu);
    if ((*fresh)->hot_rows != nullptr && old->hot_rows != nullptr) {
      (*fresh)->hot_rows->CatchUp(*old->hot_rows);
    }
    slot->current.store(Share(std::move(*fresh)));  // the swap: new requests get the new version
  }
  if (metrics_ != nullptr &&
      (result.version != result.previous_version || new_device != old_device)) {
    metrics_->RemoveModelInfo(old->name, old->version(), old_device);
  }
  old.reset();  // in-flight requests still hold it; the last one to finish frees it
  result.message = absl::StrCat(
      "model '", slot->name, "': version '", result.version, "' from '", engine::EscapeText(from),
      "' loaded and warmed up in ", absl::SixDigits(seconds), " s and now serving; version '",
      result.previous_version, "' retired (freed when its last request finishes)");
  if (result.version == result.previous_version) {
    absl::StrAppend(&result.message, "; note: both carry version '", result.version,
                    "': bump `version` in the spec so that responses tell them apart");
  }
  if (!input_changes.empty()) {
    absl::StrAppend(&result.message, "; note: its inputs differ from version '",
                    result.previous_version, "''s (", input_changes,
                    "): requests with dense values of the old widths or tables it lacks are "
                    "refused (INVALID_ARGUMENT), and a table a request leaves out scores as "
                    "the zero vector");
  }
  return result;
}

absl::Status ServedModels::ChangeServingVersion(
    absl::string_view name, absl::FunctionRef<absl::Status(const ServedModel&)> change) {
  absl::StatusOr<Slot*> slot = FindSlot(name);
  if (!slot.ok()) return slot.status();
  absl::MutexLock lock(&(*slot)->serving_mu);
  const std::shared_ptr<ServedModel> current = (*slot)->current.load();
  return change(*current);
}

std::vector<ModelHandle> ServedModels::Current() const {
  std::vector<ModelHandle> current;
  current.reserve(slots_.size());
  for (const auto& slot : slots_) current.push_back(slot->current.load());
  return current;
}

const std::string& ServedModels::default_name() const {
  static const std::string* const kNone = new std::string();
  return slots_.empty() ? *kNone : slots_[default_]->name;
}

int64_t ServedModels::versions_freed() const { return reaper_->destroyed(); }

int ServedModels::QueueDepth() const {
  int depth = 0;
  for (const auto& slot : slots_) {
    const std::shared_ptr<ServedModel> current = slot->current.load();
    if (current->batcher != nullptr) depth += current->batcher->queue_depth();
  }
  return depth;
}

void ServedModels::ShutdownBatchers() {
  for (const auto& slot : slots_) {
    absl::MutexLock lock(&slot->reload_mu);
    slot->shut_down = true;
    std::shared_ptr<ServedModel> current = slot->current.load();
    if (current->batcher != nullptr) current->batcher->Shutdown();
  }
}

}  // namespace fuserank::server
