// Whether a gRPC listen address is taken by another socket, asked before the models load so
// that a port in use stops the start at once instead of after minutes of loading (gRPC
// binds only when the server starts). A plain socket is bound as gRPC 1.51 binds
// (SO_REUSEADDR, no SO_REUSEPORT; a wildcard host as one dual-stack [::] socket, else
// 0.0.0.0) and closed at once. Plain function; thread-safe.
#ifndef FUSERANK_SERVER_LISTEN_PROBE_H_
#define FUSERANK_SERVER_LISTEN_PROBE_H_

#include <string>

namespace fuserank::server {

// True when `address` ("host:port", server/config_validation.h) cannot be bound because
// every address it resolves to is in use (EADDRINUSE). False for port 0, for an address
// that binds, and for any other failure (a name that does not resolve, an address not on
// this host): gRPC reports those itself when it listens.
bool ListenAddressInUse(const std::string& address);

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_LISTEN_PROBE_H_
