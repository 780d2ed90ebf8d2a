// spdlog set-up from the `logging` config: level, and text or JSON lines on stderr.
// Call once at start, before other threads log.
#ifndef FUSERANK_SERVER_LOGGING_H_
#define FUSERANK_SERVER_LOGGING_H_

#include "server/config.h"

namespace fuserank::server {

// Replaces spdlog's default logger with one writing `config.format` lines to stderr.
void ConfigureLogging(const LoggingConfig& config);

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_LOGGING_H_
