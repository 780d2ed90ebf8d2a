#include "tools/load_redis_dump_rows.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "engine/cpu/cpu_dtype.h"
#include "engine/status_macros.h"

namespace fuserank::tools {
namespace {

// What says a regular file is the one that was checked: a rewrite in place changes the
// size or the modification time, a replacement the inode.
struct FileIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  int64_t mtime_ns = 0;

  bool operator==(const FileIdentity& other) const {
    return dev == other.dev && ino == other.ino && size == other.size && mtime_ns == other.mtime_ns;
  }
};

// The path's identity, or nullopt when it is no regular file (a pipe, stdin, a FIFO).
std::optional<FileIdentity> RegularFileIdentity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  return FileIdentity{st.st_dev, st.st_ino, st.st_size,
                      int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec};
}

// A dump. Check() reads every line, refuses an empty dump and an id given twice (it keeps
// each row's id, 8 bytes a row, to sort them); a regular file is then read again from the
// start, one batch at a time, and must still be the file that was checked (same inode,
// size and modification time, as many rows); any other input (a pipe, stdin) can be read
// once only, so its rows are kept from the check.
class DumpRows : public RowSource {
 public:
  DumpRows(std::string path, std::string dtype)
      : path_(std::move(path)), dtype_(std::move(dtype)) {}

  absl::Status Check() {
    identity_ = RegularFileIdentity(path_);
    RETURN_IF_ERROR(Open());
    std::vector<int64_t> ids;
    checking_ = true;
    for (;;) {
      RowBatch batch;
      RETURN_IF_ERROR(Read(4096, &batch));
      if (batch.keys.empty()) break;
      rows_ += batch.keys.size();
      ids.insert(ids.end(), batch.keys.begin(), batch.keys.end());
      if (!identity_.has_value()) held_.push_back(std::move(batch));
    }
    checking_ = false;
    if (rows_ == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          path_, ": no rows (want lines \"<id> <v_1> ... <v_dim>\"); nothing to load"));
    }
    if (identity_.has_value() && RegularFileIdentity(path_) != identity_) return Changed();
    // An id twice: the later row would silently overwrite the earlier one in the cluster.
    std::sort(ids.begin(), ids.end());
    if (const auto twice = std::adjacent_find(ids.begin(), ids.end()); twice != ids.end()) {
      const int64_t id = *twice;
      std::vector<int64_t>().swap(ids);
      return IdTwice(id);
    }
    if (identity_.has_value()) RETURN_IF_ERROR(Open());
    return absl::OkStatus();
  }

  size_t rows() const override { return rows_; }
  absl::Status Next(size_t max, RowBatch* batch) override {
    batch->Clear();
    if (!identity_.has_value()) {  // kept from the check
      // Up to `max` rows of the kept batches, in order.
      while (batch->keys.size() < max && next_held_ < held_.size()) {
        const RowBatch& held = held_[next_held_];
        const size_t i = next_row_++;
        batch->keys.push_back(held.keys[i]);
        batch->bytes.append(held.value(i));
        batch->ends.push_back(batch->bytes.size());
        if (next_row_ == held.keys.size()) {
          held_[next_held_++] = RowBatch();  // handed out: give its memory back
          next_row_ = 0;
        }
      }
      return absl::OkStatus();
    }
    if (RegularFileIdentity(path_) != identity_) return Changed();
    RETURN_IF_ERROR(Read(max, batch));
    sent_ += batch->keys.size();
    // More rows than were checked (the file grew between the stat and the read), or
    // fewer at the end: not the input that was checked.
    if (sent_ > rows_ || (batch->keys.empty() && sent_ != rows_)) return Changed();
    return absl::OkStatus();
  }

 private:
  absl::Status Open() {
    line_ = 0;
    return OpenInput(path_, &in_);
  }
  absl::Status Read(size_t max, RowBatch* batch) {
    batch->Clear();
    std::string line;
    while (batch->keys.size() < max && std::getline(in_, line)) {
      ++line_;
      int64_t key = 0;
      const size_t before = batch->bytes.size();
      RETURN_IF_ERROR(ParseLine(line, &key, &batch->bytes));
      if (batch->bytes.size() == before) {  // a blank line, before row rows_ + batch size
        if (checking_) blank_before_.push_back(rows_ + batch->keys.size());
        continue;
      }
      batch->keys.push_back(key);
      batch->ends.push_back(batch->bytes.size());
    }
    if (in_.bad()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": read failed: ", std::strerror(errno)));
    }
    return absl::OkStatus();
  }
  // The line of the row'th row (0-based): rows and blank lines before it, plus one.
  size_t LineOf(size_t row) const {
    const auto blanks = std::upper_bound(blank_before_.begin(), blank_before_.end(), row);
    return row + 1 + static_cast<size_t>(blanks - blank_before_.begin());
  }
  absl::Status IdTwice(int64_t id);
  absl::Status Changed() const {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, ": changed after it was checked (", rows_,
                     " rows then); load it again once nothing writes to it"));
  }
  // Appends the line's value to *value; a blank line appends nothing.
  absl::Status ParseLine(const std::string& line, int64_t* key, std::string* value);
  absl::Status ParseCodes(const std::vector<absl::string_view>& fields, std::string* value) const;
  absl::Status ParseFloats(const std::vector<absl::string_view>& fields, std::string* value) const;
  absl::Status Error(absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat(path_, ":", line_, ": ", message));
  }

  const std::string path_;
  const std::string dtype_;
  std::ifstream in_;
  size_t line_ = 0;
  size_t dim_ = 0;  // from the first row
  size_t rows_ = 0;
  std::optional<FileIdentity> identity_;  // nullopt: no regular file, rows in held_
  std::vector<RowBatch> held_;
  size_t next_held_ = 0;
  size_t next_row_ = 0;               // in held_[next_held_]
  size_t sent_ = 0;                   // rows Next() handed out
  bool checking_ = false;             // in Check(): Read() records blank lines
  std::vector<size_t> blank_before_;  // per blank line, the index of the row after it
};

// Names the first two lines of `id`, found again in the rows (a file is read once more).
absl::Status DumpRows::IdTwice(int64_t id) {
  size_t rows[2] = {0, 0};
  int found = 0;
  size_t row = 0;
  auto visit = [&](const RowBatch& batch) {
    for (int64_t key : batch.keys) {
      if (key == id && found < 2) rows[found++] = row;
      ++row;
    }
  };
  if (identity_.has_value()) {
    RETURN_IF_ERROR(Open());
    RowBatch batch;
    do {
      RETURN_IF_ERROR(Read(4096, &batch));
      visit(batch);
    } while (!batch.keys.empty() && found < 2);
  } else {
    for (const RowBatch& batch : held_) visit(batch);
  }
  if (found < 2) return Changed();
  return absl::InvalidArgumentError(absl::StrCat(path_, ":", LineOf(rows[1]), ": id ", id,
                                                 " again (first on line ", LineOf(rows[0]),
                                                 "): one row per id"));
}

absl::Status DumpRows::ParseLine(const std::string& line, int64_t* key, std::string* value) {
  const std::vector<absl::string_view> fields =
      absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
  if (fields.empty()) return absl::OkStatus();
  if (!absl::SimpleAtoi(fields[0], key)) {
    return Error(absl::StrCat("bad key '", fields[0].substr(0, 40),
                              "': want an int64 id, then the values, separated by spaces or "
                              "tabs"));
  }
  // int8: the scale and the bias come first.
  const size_t first = dtype_ == "int8" ? 3 : 1;
  if (fields.size() <= first) {
    return Error(absl::StrCat("no values", first == 3 ? " after scale and bias" : ""));
  }
  if (dim_ == 0) dim_ = fields.size() - first;
  if (fields.size() - first != dim_) {
    return Error(absl::StrCat(fields.size() - first, " values, want ", dim_));
  }
  return first == 3 ? ParseCodes(fields, value) : ParseFloats(fields, value);
}

absl::Status DumpRows::ParseCodes(const std::vector<absl::string_view>& fields,
                                  std::string* value) const {
  float q[2] = {0, 0};
  for (int j = 0; j < 2; ++j) {
    if (!absl::SimpleAtof(fields[1 + j], &q[j]) || !std::isfinite(q[j])) {
      return Error(absl::StrCat(j == 0 ? "scale" : "bias", " is not a finite number"));
    }
  }
  for (size_t j = 3; j < fields.size(); ++j) {
    int code = 0;
    if (!absl::SimpleAtoi(fields[j], &code) || code < -128 || code > 127) {
      return Error(absl::StrCat("code ", j - 2, " is not an integer in -128..127"));
    }
    value->push_back(static_cast<char>(static_cast<int8_t>(code)));
  }
  value->append(reinterpret_cast<const char*>(q), sizeof(q));
  return absl::OkStatus();
}

// fp32 values as they are; fp16 and bf16 rounded to nearest even, and refused when the
// result is not finite (a value beyond the dtype's range): the server never checks a
// remote row, so an Inf stored here would be served.
absl::Status DumpRows::ParseFloats(const std::vector<absl::string_view>& fields,
                                   std::string* value) const {
  for (size_t j = 1; j < fields.size(); ++j) {
    float v = 0;
    if (!absl::SimpleAtof(fields[j], &v) || !std::isfinite(v)) {
      return Error(absl::StrCat("value ", j, " is not a finite number"));
    }
    if (dtype_ == "fp32") {
      value->append(reinterpret_cast<const char*>(&v), 4);
      continue;
    }
    const bool fp16 = dtype_ == "fp16";
    const uint16_t h = fp16 ? engine::FloatToHalf(v) : engine::FloatToBFloat16(v);
    if (!std::isfinite(fp16 ? engine::HalfToFloat(h) : engine::BFloat16ToFloat(h))) {
      return Error(absl::StrCat("value ", j, " (", fields[j].substr(0, 40), ") overflows ", dtype_,
                                " (largest finite ", fp16 ? "65504" : "3.3895e38", ")"));
    }
    value->append(reinterpret_cast<const char*>(&h), 2);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<RowSource>> OpenDumpRows(const std::string& path,
                                                        const std::string& dtype) {
  if (dtype != "fp32" && dtype != "fp16" && dtype != "bf16" && dtype != "int8") {
    return absl::InvalidArgumentError(
        absl::StrCat("--dtype: fp32, fp16, bf16 or int8, got '", dtype, "'"));
  }
  auto rows = std::make_unique<DumpRows>(path, dtype);
  RETURN_IF_ERROR(rows->Check());
  return rows;
}

}  // namespace fuserank::tools
