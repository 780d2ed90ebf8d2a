// Safetensors writer: the header first (names, dtypes, shapes, offsets), then the
// tensor bytes streamed in order, into a temporary file renamed into place on Close().
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "engine/safetensors.h"
#include "engine/status_macros.h"
#include "engine/tensor_shape.h"

namespace fuserank::engine {
namespace {

void AppendJsonString(std::string* out, absl::string_view s) {
  out->push_back('"');
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      out->append(buf);
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

}  // namespace

absl::StatusOr<std::unique_ptr<SafetensorsWriter>> SafetensorsWriter::Create(
    const std::string& path, std::vector<Entry> entries,
    const std::map<std::string, std::string>& metadata) {
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : metadata) {
      if (!first) header += ",";
      first = false;
      AppendJsonString(&header, key);
      header += ":";
      AppendJsonString(&header, value);
    }
    header += "}";
  }
  std::set<absl::string_view> names;
  uint64_t offset = 0;
  for (const Entry& e : entries) {
    if (e.name.empty() || e.name == "__metadata__" || !names.insert(e.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad or duplicate tensor name '", e.name, "'"));
    }
    const size_t element = SafetensorsDTypeSize(e.dtype);
    uint64_t elements = 0, bytes = 0;
    if (element == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", e.name, "': unknown dtype '", e.dtype, "'"));
    }
    if (!NumElements(e.shape, &elements) || __builtin_mul_overflow(elements, element, &bytes)) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", e.name, "': bad shape"));
    }
    if (header.size() > 1) header += ",";
    AppendJsonString(&header, e.name);
    absl::StrAppend(&header, ":{\"dtype\":\"", e.dtype, "\",\"shape\":[",
                    absl::StrJoin(e.shape, ","), "],\"data_offsets\":[", offset, ",",
                    offset + bytes, "]}");
    offset += bytes;
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');  // data starts 8-byte aligned

  const std::string tmp = path + ".tmp";
  // A file of its own: whatever is at the temporary name (a file left by a run that died,
  // or a link or file someone planted there) is removed, never followed nor written into;
  // O_EXCL then refuses anything planted again in between.
  constexpr int kFlags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = ::open(tmp.c_str(), kFlags, 0666);
  if (fd < 0 && errno == EEXIST && ::unlink(tmp.c_str()) == 0) {
    fd = ::open(tmp.c_str(), kFlags, 0666);
  }
  std::FILE* file = fd >= 0 ? ::fdopen(fd, "wb") : nullptr;
  if (file == nullptr) {
    const int error = errno;
    if (fd >= 0) ::close(fd);
    return absl::InternalError(absl::StrCat(tmp, ": cannot create: ", std::strerror(error)));
  }
  std::setvbuf(file, nullptr, _IOFBF, 1 << 20);
  std::unique_ptr<SafetensorsWriter> writer(new SafetensorsWriter(path, file, offset));
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(header.size() >> (8 * i));
  if (std::fwrite(len, 1, 8, file) != 8 ||
      std::fwrite(header.data(), 1, header.size(), file) != header.size()) {
    return absl::InternalError(absl::StrCat(tmp, ": write failed: ", std::strerror(errno)));
  }
  return writer;
}

SafetensorsWriter::~SafetensorsWriter() {
  if (file_ != nullptr) {
    std::fclose(file_);
    std::remove((path_ + ".tmp").c_str());
  }
}

absl::Status SafetensorsWriter::Append(const void* bytes, size_t n) {
  if (file_ == nullptr) return absl::FailedPreconditionError("writer is closed");
  if (n > data_bytes_ - written_) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": more tensor bytes than the header declares (", data_bytes_, ")"));
  }
  if (n > 0 && std::fwrite(bytes, 1, n, file_) != n) {
    return absl::InternalError(absl::StrCat(path_, ".tmp: write failed: ", std::strerror(errno)));
  }
  written_ += n;
  return absl::OkStatus();
}

absl::Status SafetensorsWriter::Close() {
  if (file_ == nullptr) return absl::FailedPreconditionError("writer is closed");
  if (written_ != data_bytes_) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": ", written_, " tensor bytes written, ", data_bytes_, " declared"));
  }
  std::FILE* file = file_;
  file_ = nullptr;
  const std::string tmp = path_ + ".tmp";
  if (std::fclose(file) != 0) {
    std::remove(tmp.c_str());
    return absl::InternalError(absl::StrCat(tmp, ": close failed: ", std::strerror(errno)));
  }
  if (std::rename(tmp.c_str(), path_.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::InternalError(absl::StrCat(path_, ": rename failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status WriteSafetensors(const std::string& path,
                              const std::vector<std::pair<std::string, TensorView>>& tensors) {
  std::vector<const std::pair<std::string, TensorView>*> order;
  for (const auto& t : tensors) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    return SafetensorsDTypeSize(a->second.dtype) > SafetensorsDTypeSize(b->second.dtype);
  });
  std::vector<SafetensorsWriter::Entry> entries;
  for (const auto* t : order) {
    uint64_t elements = 0;
    if (!NumElements(t->second.shape, &elements) ||
        elements * SafetensorsDTypeSize(t->second.dtype) != t->second.nbytes) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", t->first, "': ", t->second.nbytes,
                                                     " bytes do not match ", t->second.dtype, " ",
                                                     ShapeString(t->second.shape)));
    }
    entries.push_back({t->first, t->second.dtype, t->second.shape});
  }
  ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsWriter> writer,
                   SafetensorsWriter::Create(path, std::move(entries)));
  for (const auto* t : order) RETURN_IF_ERROR(writer->Append(t->second.data, t->second.nbytes));
  return writer->Close();
}

}  // namespace fuserank::engine
