// The PEM files of server.tls, read and checked before gRPC sees them: given a bad
// certificate or key, gRPC itself only fails to listen, without naming the file or the
// reason. Stateless; thread-safe.
#ifndef FUSERANK_SERVER_TLS_FILES_H_
#define FUSERANK_SERVER_TLS_FILES_H_

#include <string>

#include "absl/status/statusor.h"
#include "server/config.h"

namespace fuserank::server {

struct TlsFiles {
  std::string cert_chain;   // server.tls.cert_file
  std::string private_key;  // server.tls.key_file
  std::string client_ca;    // server.tls.client_ca_file; "" when not set
};

// Reads the files of `tls` (REQUIRES: tls.enabled()). FAILED_PRECONDITION naming the key,
// the path and the reason when a file cannot be read, holds no PEM block of the kind it
// must (CERTIFICATE; an unencrypted PRIVATE KEY), or holds a block that is not base64 DER.
// Whether the key matches the certificate only gRPC can tell, when it starts listening.
absl::StatusOr<TlsFiles> ReadTlsFiles(const TlsConfig& tls);

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_TLS_FILES_H_
