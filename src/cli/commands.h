// `ggflow` subcommands. Each lives in its own cmd_<name>.cpp, in namespace cmd_<name> (named, not
// anonymous: the files are compiled together in a unity build, CMakeLists.txt), and registers itself with
// GGFLOW_COMMAND; its callback stores the process exit code in `rc`. Errors go to stderr as one
// clear line ("ggflow <cmd>: what is wrong (hint: how to fix it)") with a non-zero exit code.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "base/result.h"

namespace ggflow::cli {

using AddCommand = void (*)(CLI::App& app, int& rc);
bool register_command(const char* name, AddCommand add);

// Print "ggflow <cmd>: <error>" on stderr and return the exit code to use (1).
int fail(const std::string& cmd, const Error& e);
// -t above the machine's cores works but is slow (the threads of one step wait on each other's
// cores): say so on stderr, once per command, with the count to use.
void warn_threads(const std::string& cmd, int threads);

}  // namespace ggflow::cli

#define GGFLOW_COMMAND(name, fn) \
  [[maybe_unused]] static const bool ggflow_cmd_registered_##name = ::ggflow::cli::register_command(#name, fn)
