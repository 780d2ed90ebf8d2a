#include "server/tls_files.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "engine/regular_file.h"
#include "engine/status_macros.h"

namespace fuserank::server {
namespace {

constexpr absl::string_view kBegin = "-----BEGIN ";
constexpr absl::string_view kEnd = "-----END ";
constexpr absl::string_view kDashes = "-----";

struct PemBlock {
  std::string label;   // "CERTIFICATE", "PRIVATE KEY", ...
  bool valid = false;  // the body is base64 of DER (an ASN.1 SEQUENCE)
};

absl::Status Bad(absl::string_view key, const std::string& path, absl::string_view reason) {
  return absl::FailedPreconditionError(absl::StrCat(key, ": '", path, "' ", reason));
}

// A PEM file is a few kB; a bound keeps a mistaken path (a log, a device) from being read.
constexpr uint64_t kMaxPemBytes = 1 << 20;

absl::StatusOr<std::string> Read(absl::string_view key, const std::string& path) {
  absl::StatusOr<std::string> text = engine::ReadRegularFile(path, kMaxPemBytes, "file");
  if (text.ok()) return text;
  const absl::string_view why = text.status().message();
  const size_t reason = why.rfind(": ");
  if (absl::IsFailedPrecondition(text.status())) {  // not a regular file, or too large
    return absl::FailedPreconditionError(absl::StrCat(key, ": ", why));
  }
  return Bad(
      key, path,
      absl::StrCat("cannot be read", reason == absl::string_view::npos ? "" : why.substr(reason)));
}

// Every PEM block of `text`, in order; an unterminated block ends the list.
std::vector<PemBlock> PemBlocks(absl::string_view text) {
  std::vector<PemBlock> blocks;
  for (size_t at = text.find(kBegin); at != absl::string_view::npos; at = text.find(kBegin, at)) {
    const size_t label_begin = at + kBegin.size();
    const size_t label_end = text.find(kDashes, label_begin);
    if (label_end == absl::string_view::npos) break;
    PemBlock block;
    block.label = std::string(text.substr(label_begin, label_end - label_begin));
    const std::string end_line = absl::StrCat(kEnd, block.label, kDashes);
    const size_t body_begin = label_end + kDashes.size();
    const size_t body_end = text.find(end_line, body_begin);
    if (body_end == absl::string_view::npos) break;
    std::string body(text.substr(body_begin, body_end - body_begin));
    body.erase(
        std::remove_if(body.begin(), body.end(),
                       [](char c) { return absl::ascii_isspace(static_cast<unsigned char>(c)); }),
        body.end());
    std::string der;
    block.valid = absl::Base64Unescape(body, &der) && !der.empty() && der[0] == '\x30';
    blocks.push_back(std::move(block));
    at = body_end + end_line.size();
  }
  return blocks;
}

// `path` must hold at least one valid block with one of `labels` and no invalid one of them.
absl::StatusOr<std::string> ReadPem(absl::string_view key, const std::string& path,
                                    const std::vector<absl::string_view>& labels,
                                    absl::string_view what) {
  ASSIGN_OR_RETURN(std::string text, Read(key, path));
  int found = 0;
  for (const PemBlock& block : PemBlocks(text)) {
    if (block.label == "ENCRYPTED PRIVATE KEY") {
      return Bad(key, path, "holds an encrypted private key; give the key unencrypted");
    }
    if (std::find(labels.begin(), labels.end(), block.label) == labels.end()) continue;
    if (!block.valid) {
      return Bad(key, path,
                 absl::StrCat("has a PEM ", block.label, " block that is not base64 DER"));
    }
    ++found;
  }
  if (found == 0) return Bad(key, path, absl::StrCat("holds no PEM ", what));
  return text;
}

}  // namespace

absl::StatusOr<TlsFiles> ReadTlsFiles(const TlsConfig& tls) {
  TlsFiles files;
  ASSIGN_OR_RETURN(files.cert_chain, ReadPem("server.tls.cert_file", tls.cert_file, {"CERTIFICATE"},
                                             "CERTIFICATE block"));
  ASSIGN_OR_RETURN(files.private_key, ReadPem("server.tls.key_file", tls.key_file,
                                              {"PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY"},
                                              "PRIVATE KEY block (PKCS#8, RSA or EC)"));
  if (!tls.client_ca_file.empty()) {
    ASSIGN_OR_RETURN(files.client_ca, ReadPem("server.tls.client_ca_file", tls.client_ca_file,
                                              {"CERTIFICATE"}, "CERTIFICATE block"));
  }
  return files;
}

}  // namespace fuserank::server
