// The subcommands of the `ckptfs` command line: each has a spec (flags and
// help, see flags.h) and a Run function that returns the process exit
// status: 0 success, 1 failure (reported on stderr), 2 usage error.
// Each Run is called once, from main's thread.
#ifndef CKPTFS_TOOLS_COMMANDS_H_
#define CKPTFS_TOOLS_COMMANDS_H_

#include <vector>

#include "tools/flags.h"

namespace ckptfs::tools {

struct Command {
  CommandSpec spec;
  int (*run)(const ParsedFlags& flags);
};

// Every subcommand, in the order `ckptfs help` lists them.
const std::vector<Command>& AllCommands();

// cluster_up.cc: start a local cluster (meta + N storage + the mount).
CommandSpec UpSpec();
int RunUp(const ParsedFlags& flags);

// cluster_down.cc: stop what `up` started.
CommandSpec DownSpec();
int RunDown(const ParsedFlags& flags);

// mount_cmd.cc: mount an existing cluster / unmount.
CommandSpec MountSpec();
int RunMount(const ParsedFlags& flags);
CommandSpec UmountSpec();
int RunUmount(const ParsedFlags& flags);

// status_cmd.cc: servers, redundancy, clients, pending checkpoints.
CommandSpec StatusSpec();
int RunStatus(const ParsedFlags& flags);

// ckpt_cmd.cc, ckpt_show_cmd.cc: checkpoint transactions through a mount's
// extended attributes (mount_transactions.h).
CommandSpec CkptDeclareSpec();
int RunCkptDeclare(const ParsedFlags& flags);
CommandSpec CkptCommitSpec();
int RunCkptCommit(const ParsedFlags& flags);
CommandSpec CkptStateSpec();
int RunCkptState(const ParsedFlags& flags);
CommandSpec CkptLsSpec();
int RunCkptLs(const ParsedFlags& flags);
CommandSpec CkptKeepSpec();
int RunCkptKeep(const ParsedFlags& flags);
CommandSpec CkptRmSpec();
int RunCkptRm(const ParsedFlags& flags);
// ckpt_gc_cmd.cc: retention now.
CommandSpec CkptGcSpec();
int RunCkptGc(const ParsedFlags& flags);
// ckpt_latest_name_cmd.cc: the name of a run directory's latest symlink.
CommandSpec CkptLatestNameSpec();
int RunCkptLatestName(const ParsedFlags& flags);
// ckpt_verify_cmd.cc: files, chunks and CRC32C read from the storage
// servers (ckpt_check.h).
CommandSpec CkptShowSpec();
int RunCkptShow(const ParsedFlags& flags);
CommandSpec CkptVerifySpec();
int RunCkptVerify(const ParsedFlags& flags);

// repair_cmd.cc: restore missing and corrupt copies, move copies off dead
// servers (server/repair/repair_pass.h); --watch keeps doing it.
CommandSpec RepairSpec();
int RunRepair(const ParsedFlags& flags);

// Usage error inside Run (a flag value out of range, ...): prints
// "ckptfs <cmd>: <message>" and the usage on stderr; returns 2.
int UsageError(const CommandSpec& spec, const std::string& message);

// Runtime failure: prints "ckptfs <cmd>: <message>" on stderr; returns 1.
int Failure(const CommandSpec& spec, const std::string& message);

}  // namespace ckptfs::tools

#endif  // CKPTFS_TOOLS_COMMANDS_H_
