// See commands.h.
#include "tools/commands.h"

#include <iostream>

namespace ckptfs::tools {

const std::vector<Command>& AllCommands() {
  static const std::vector<Command>* commands = new std::vector<Command>{
      {UpSpec(), RunUp},
      {DownSpec(), RunDown},
      {MountSpec(), RunMount},
      {UmountSpec(), RunUmount},
      {StatusSpec(), RunStatus},
      {RepairSpec(), RunRepair},
      {CkptDeclareSpec(), RunCkptDeclare},
      {CkptCommitSpec(), RunCkptCommit},
      {CkptStateSpec(), RunCkptState},
      {CkptLsSpec(), RunCkptLs},
      {CkptShowSpec(), RunCkptShow},
      {CkptVerifySpec(), RunCkptVerify},
      {CkptKeepSpec(), RunCkptKeep},
      {CkptRmSpec(), RunCkptRm},
      {CkptGcSpec(), RunCkptGc},
      {CkptLatestNameSpec(), RunCkptLatestName},
  };
  return *commands;
}

int UsageError(const CommandSpec& spec, const std::string& message) {
  std::cerr << "ckptfs " << spec.name << ": " << message << "\n\n" << Usage(spec);
  return 2;
}

int Failure(const CommandSpec& spec, const std::string& message) {
  std::cerr << "ckptfs " << spec.name << ": " << message << std::endl;
  return 1;
}

}  // namespace ckptfs::tools
