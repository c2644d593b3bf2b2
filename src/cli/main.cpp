#include <cstdio>
#include <map>
#include <thread>

#include "cli/commands.h"
#include "cpu/host.h"

namespace ggflow::cli {

static std::map<std::string, AddCommand>& registry() {
  static std::map<std::string, AddCommand> r;
  return r;
}

bool register_command(const char* name, AddCommand add) {
  registry()[name] = add;
  return true;
}

int fail(const std::string& cmd, const Error& e) {
  std::fprintf(stderr, "ggflow %s: %s\n", cmd.c_str(), e.str().c_str());
  return 1;
}

void warn_threads(const std::string& cmd, int threads) {
  const int cores = cpu::usable_cores();
  if (threads <= cores) return;
  std::fprintf(stderr,
               "ggflow %s: warning: -t %d is more threads than the %d cores this process may use (the machine's, its "
               "CPU affinity and its cgroup's CPU quota); each step then waits on threads sharing a core (decode "
               "about 3x slower than -t %d) (hint: -t %d or fewer)\n",
               cmd.c_str(), threads, cores, cores, cores);
}

}  // namespace ggflow::cli

int main(int argc, char** argv) {
  CLI::App app{"ggflow: serve GGUF language models on the CPU, built as a graph compiler"};
  app.require_subcommand(1);
  int rc = 0;
  for (auto& [name, add] : ggflow::cli::registry()) add(app, rc);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return rc;
}
