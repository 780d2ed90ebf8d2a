#include "tools/cli/flags.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/internal/parse.h"
#include "absl/flags/internal/usage.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"

namespace fuserank::cli {

void ParseFlagsOrExit(int argc, char** argv, absl::string_view program, absl::string_view usage,
                      std::initializer_list<absl::string_view> flag_sources) {
  std::vector<std::string> sources(flag_sources.begin(), flag_sources.end());
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [sources](absl::string_view file) {
    for (const std::string& source : sources) {
      if (absl::StrContains(file, source)) return true;
    }
    return false;
  };
  config.contains_helpshort_flags = config.contains_help_flags;
  absl::SetFlagsUsageConfig(config);
  absl::SetProgramUsageMessage(usage);
  // absl::ParseCommandLine exits 1 after printing --help; parsing with the usage flags left
  // alone, then handling them here, lets a help that was asked for exit 0.
  // Written for Abseil 20220623 (Debian bookworm's libabsl-dev), which has no public API
  // for this, against its internals: flags_internal::ParseCommandLineImpl (five arguments)
  // and HandleUsageFlags (an int, -1 when no usage flag was given). Internals change without
  // notice; on an upgrade, either
  //  - use the public absl::ParseAbseilFlagsOnly of later releases (it returns the
  //    positional arguments and the unrecognized flags; absl::ReportUnrecognizedFlags
  //    reports the latter), accepting that its --help exits 1 (tests/tools/cli_test.py
  //    checks for 0), or
  //  - keep exit 0 with that release's flags_internal::ParseAbseilFlagsOnlyImpl(...,
  //    UsageFlagsAction::kIgnoreUsage) and HandleUsageFlags (a HelpMode there, kNone for
  //    none), checking their signatures in its absl/flags/internal/parse.h and usage.h.
  using absl::flags_internal::ArgvListAction;
  using absl::flags_internal::OnUndefinedFlag;
  using absl::flags_internal::UsageFlagsAction;
  const std::vector<char*> rest = absl::flags_internal::ParseCommandLineImpl(
      argc, argv, ArgvListAction::kRemoveParsedArgs, UsageFlagsAction::kIgnoreUsage,
      OnUndefinedFlag::kAbortIfUndefined);
  if (absl::flags_internal::HandleUsageFlags(std::cout, absl::ProgramUsageMessage()) != -1) {
    std::cout.flush();
    std::exit(0);
  }
  if (rest.size() > 1) {
    const std::string name(program);
    std::fprintf(stderr, "%s: unexpected argument '%s' (flags are --name=value; see --help)\n",
                 name.c_str(), rest[1]);
    std::exit(2);
  }
}

}  // namespace fuserank::cli
