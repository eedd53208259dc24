// See interrupt.h.
#include "bench/interrupt.h"

#include <signal.h>

#include <atomic>

namespace ckptfs::bench {
namespace {

std::atomic<bool> g_interrupted{false};

void OnSignal(int) { g_interrupted.store(true, std::memory_order_relaxed); }

}  // namespace

void InstallInterruptHandlers() {
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

bool InterruptRequested() { return g_interrupted.load(std::memory_order_relaxed); }
void RequestInterrupt() { g_interrupted.store(true, std::memory_order_relaxed); }

}  // namespace ckptfs::bench
