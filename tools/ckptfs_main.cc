// The `ckptfs` command line: dispatches to a subcommand (commands.h).
//   ckptfs help [COMMAND]      ckptfs COMMAND --help      ckptfs COMMAND [flags]
// Exit status: 0 success, 1 failure, 2 usage error.
#include <signal.h>

#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "tools/commands.h"
#include "tools/flags.h"

namespace ckptfs::tools {
namespace {

std::string GeneralUsage() {
  std::string text =
      "usage: ckptfs COMMAND [flags]\n\n"
      "ckptfs: a distributed filesystem for deep-learning checkpoints.\n\ncommands:\n";
  for (const Command& command : AllCommands()) {
    std::string name = "  " + command.spec.name;
    name.resize(12, ' ');
    text += name + command.spec.summary + "\n";
  }
  text += "  help      Show this text, or `ckptfs help COMMAND` for one command.\n\n"
          "Flags are written --flag VALUE or --flag=VALUE.\n";
  return text;
}

const Command* FindCommand(const std::string& name) {
  for (const Command& command : AllCommands()) {
    if (command.spec.name == name) return &command;
  }
  return nullptr;
}

int Main(int argc, char** argv) {
  // A closed stdout (`ckptfs up | head -1`) must not kill `up` halfway;
  // daemons get the default disposition back (process.cc).
  ::signal(SIGPIPE, SIG_IGN);
  if (argc < 2) {
    std::cerr << GeneralUsage();
    return 2;
  }
  const std::string name = argv[1];
  if (name == "help" || name == "--help" || name == "-h") {
    if (argc == 2) {
      std::cout << GeneralUsage();
      return 0;
    }
    const Command* command = FindCommand(argv[2]);
    if (command == nullptr || argc > 3) {
      std::cerr << "ckptfs help: unknown command \"" << argv[2] << "\"\n\n" << GeneralUsage();
      return 2;
    }
    std::cout << Usage(command->spec);
    return 0;
  }
  const Command* command = FindCommand(name);
  if (command == nullptr) {
    std::cerr << "ckptfs: unknown command \"" << name << "\"\n\n" << GeneralUsage();
    return 2;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  absl::StatusOr<ParsedFlags> flags = ParseFlags(command->spec, args);
  if (!flags.ok()) return UsageError(command->spec, std::string(flags.status().message()));
  if (flags->help()) {
    std::cout << Usage(command->spec);
    return 0;
  }
  return command->run(*flags);
}

}  // namespace
}  // namespace ckptfs::tools

int main(int argc, char** argv) { return ckptfs::tools::Main(argc, argv); }
