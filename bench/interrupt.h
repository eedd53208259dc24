// Ctrl-C handling for ckptfs-bench: SIGINT and SIGTERM only set a flag; the
// executors notice it within one progress interval, kill or drain their
// ranks, and the runner removes what it wrote before exiting.
//
// Thread-safe (an atomic flag).
#ifndef CKPTFS_BENCH_INTERRUPT_H_
#define CKPTFS_BENCH_INTERRUPT_H_

namespace ckptfs::bench {

// Installs the handlers (without SA_RESTART, so a blocking poll wakes).
void InstallInterruptHandlers();
// True once SIGINT or SIGTERM arrived (or RequestInterrupt was called).
bool InterruptRequested();
void RequestInterrupt();

}  // namespace ckptfs::bench

#endif  // CKPTFS_BENCH_INTERRUPT_H_
