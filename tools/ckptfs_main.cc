// The `ckptfs` command line: dispatches to a subcommand (commands.h).
//   ckptfs help [COMMAND]      ckptfs COMMAND --help      ckptfs COMMAND [flags]
//   ckptfs GROUP COMMAND [arguments] [flags]   (ckptfs ckpt commit DIR RANK)
// Exit status: 0 success, 1 failure, 2 usage error.
#include <signal.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "tools/commands.h"
#include "tools/flags.h"

namespace ckptfs::tools {
namespace {

// "ckpt" for "ckpt commit"; "" for a command of no group ("up").
std::string GroupOf(const std::string& name) {
  const size_t space = name.find(' ');
  return space == std::string::npos ? "" : name.substr(0, space);
}

bool IsGroup(const std::string& word) {
  for (const Command& command : AllCommands()) {
    if (GroupOf(command.spec.name) == word) return true;
  }
  return false;
}

// The one-line summaries of the commands of `group` (all if "*"), in a
// column wide enough for the longest name.
std::string CommandList(const std::string& group) {
  auto listed = [&group](const Command& command) {
    return group == "*" || GroupOf(command.spec.name) == group;
  };
  size_t width = 16;
  for (const Command& command : AllCommands()) {
    if (listed(command)) width = std::max(width, command.spec.name.size() + 4);
  }
  std::string text;
  for (const Command& command : AllCommands()) {
    if (!listed(command)) continue;
    std::string name = "  " + command.spec.name;
    name.resize(width, ' ');
    text += name + command.spec.summary + "\n";
  }
  return text;
}

std::string GeneralUsage() {
  return "usage: ckptfs COMMAND [flags]\n\n"
         "ckptfs: a distributed filesystem for deep-learning checkpoints.\n\ncommands:\n" +
         CommandList("*") +
         "  help          Show this text, or `ckptfs help COMMAND` for one command.\n\n"
         "Flags are written --flag VALUE or --flag=VALUE.\n";
}

std::string GroupUsage(const std::string& group) {
  return "usage: ckptfs " + group + " COMMAND [arguments] [flags]\n\ncommands:\n" +
         CommandList(group) + "\n`ckptfs " + group + " COMMAND --help` for one command.\n";
}

const Command* FindCommand(const std::string& name) {
  for (const Command& command : AllCommands()) {
    if (command.spec.name == name) return &command;
  }
  return nullptr;
}

bool IsHelp(const std::string& word) { return word == "help" || word == "--help" || word == "-h"; }

int Main(int argc, char** argv) {
  // A closed stdout (`ckptfs up | head -1`) must not kill `up` halfway;
  // daemons get the default disposition back (process.cc).
  ::signal(SIGPIPE, SIG_IGN);
  if (argc < 2) {
    std::cerr << GeneralUsage();
    return 2;
  }
  std::string name = argv[1];
  if (IsHelp(name)) {
    if (argc == 2) {
      std::cout << GeneralUsage();
      return 0;
    }
    std::string topic = argv[2];
    for (int i = 3; i < argc; ++i) topic += std::string(" ") + argv[i];
    if (IsGroup(topic)) {
      std::cout << GroupUsage(topic);
      return 0;
    }
    const Command* command = FindCommand(topic);
    if (command == nullptr) {
      std::cerr << "ckptfs help: unknown command \"" << topic << "\"\n\n" << GeneralUsage();
      return 2;
    }
    std::cout << Usage(command->spec);
    return 0;
  }
  int first_arg = 2;
  if (IsGroup(name)) {
    if (argc < 3) {
      std::cerr << GroupUsage(name);
      return 2;
    }
    if (IsHelp(argv[2])) {
      std::cout << GroupUsage(name);
      return 0;
    }
    name += std::string(" ") + argv[2];
    first_arg = 3;
    if (FindCommand(name) == nullptr) {
      std::cerr << "ckptfs: unknown command \"" << name << "\"\n\n" << GroupUsage(GroupOf(name));
      return 2;
    }
  }
  const Command* command = FindCommand(name);
  if (command == nullptr) {
    std::cerr << "ckptfs: unknown command \"" << name << "\"\n\n" << GeneralUsage();
    return 2;
  }
  std::vector<std::string> args(argv + first_arg, argv + argc);
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
