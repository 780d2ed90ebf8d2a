// The command line of fuserank's C++ tools (tools/, bench/): absl flags, with --help that
// lists the tool's own flags and exits 0, and positional arguments refused. Call once,
// from main, before any thread starts; not thread-safe.
#ifndef FUSERANK_TOOLS_CLI_FLAGS_H_
#define FUSERANK_TOOLS_CLI_FLAGS_H_

#include <initializer_list>

#include "absl/strings/string_view.h"

namespace fuserank::cli {

// Sets the usage message and parses argv into the flags. --help (--helpshort, --helpfull,
// --help=SUBSTRING, --version) prints to stdout and exits 0; --help lists the flags
// defined in the source files whose path holds one of `flag_sources` ("tools/gen_model.cc",
// "bench/loadgen/"): absl's default lists only the flags of a file named after the
// program, and no fuserank tool has one. An argument that is no flag exits 2, naming it;
// an unknown flag or a bad value exits 1 (absl's message).
void ParseFlagsOrExit(int argc, char** argv, absl::string_view program, absl::string_view usage,
                      std::initializer_list<absl::string_view> flag_sources);

}  // namespace fuserank::cli

#endif  // FUSERANK_TOOLS_CLI_FLAGS_H_
