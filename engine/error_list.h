// The problems found in one configuration document (the server config, a model spec, a
// weights file checked against its spec), collected so that one pass reports every problem
// instead of the first. Each is "<file>: <key>: <reason>" (no file: "<key>: <reason>").
// At most kMaxErrorLines are kept (a bad document can hold a problem per key); the rest are
// counted, and the status says "... and N more". Single-threaded; copyable.
#ifndef FUSERANK_ENGINE_ERROR_LIST_H_
#define FUSERANK_ENGINE_ERROR_LIST_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace fuserank::engine {

// The most problems one ErrorList keeps.
inline constexpr size_t kMaxErrorLines = 100;

class ErrorList {
 public:
  // `file` prefixes every problem; "" for none (the caller adds the context later).
  explicit ErrorList(std::string file = "") : file_(std::move(file)) {}

  // `key` is the dotted path of the value ("engine.streams", "tables[0].rows"); `reason`
  // says what is wrong and what was found ("must be in 1..64, got 0").
  void Add(absl::string_view key, absl::string_view reason);
  // A problem that no single key names ("tensor 'x' is missing ...").
  void AddLine(absl::string_view problem);

  bool empty() const { return lines_.empty(); }
  // The first kMaxErrorLines problems.
  const std::vector<std::string>& lines() const { return lines_; }
  // Problems added past kMaxErrorLines (not kept).
  size_t dropped() const { return dropped_; }
  // OK when empty, else INVALID_ARGUMENT with the problems joined by `separator`, and
  // "... and N more" when some were dropped.
  absl::Status ToStatus(absl::string_view separator = "\n") const;

 private:
  bool Full();  // counts a problem that is not kept

  std::string file_;
  std::vector<std::string> lines_;
  size_t dropped_ = 0;
};

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_ERROR_LIST_H_
