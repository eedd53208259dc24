// MetricsHttpServer: a minimal HTTP/1.1 server for Prometheus scrapes.
// `GET /metrics` (or HEAD) answers the registry rendered in the text format;
// any other path 404, any other method 405, a request head over
// Options::max_request_bytes 431, a malformed one 400. Each connection is
// closed after its response (Connection: close); a client gets
// Options::io_timeout to send its request and to take the response.
//
// Many scrapers are served at once: one thread polls every connection and
// moves each along as its socket allows, so a slow or silent client delays
// nobody else. At most Options::max_clients connections are held; a new one
// beyond that closes the oldest still sending its request (else the oldest).
//
// It runs on its own thread from Start until destruction. The destructor
// wakes that thread (even in the middle of slow clients' requests), joins
// it and closes the listening socket and every connection.
//
// Thread-safety: address() from any thread; the registry must outlive the
// server.
#ifndef CKPTFS_COMMON_METRICS_HTTP_SERVER_H_
#define CKPTFS_COMMON_METRICS_HTTP_SERVER_H_

#include <cstddef>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/metrics/metrics.h"
#include "common/unique_fd.h"

namespace ckptfs::metrics {

class MetricsHttpServer {
 public:
  struct Options {
    size_t max_request_bytes = 8192;
    absl::Duration io_timeout = absl::Seconds(5);
    size_t max_clients = 64;
  };

  // Serves `registry` on `listener`, a listening TCP socket (ListenTcp).
  // Fails only if the thread's wake-up pipe cannot be made.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(UniqueFd listener,
                                                                  Registry* registry,
                                                                  Options options);
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(UniqueFd listener,
                                                                  Registry* registry) {
    return Start(std::move(listener), registry, Options());
  }

  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;
  ~MetricsHttpServer();

  // "host:port" the listener is bound to.
  const std::string& address() const { return address_; }

 private:
  MetricsHttpServer(UniqueFd listener, UniqueFd wake_read, UniqueFd wake_write, Registry* registry,
                    Options options, std::string address);
  // One connection and how far it got.
  struct Client {
    enum class Phase { kReading, kSending, kDraining };
    UniqueFd fd;
    Phase phase = Phase::kReading;
    std::string head;      // the request as received so far
    std::string response;  // once read
    size_t sent = 0;
    size_t drained = 0;
    absl::Time deadline;  // of the current phase
  };

  void Run();
  void Accept(std::vector<Client>& clients);
  // Moves `client` along after poll said its socket is ready; false once
  // it is done (then it is closed).
  bool Advance(Client& client);
  // Sets `client` sending `response`.
  void StartSending(Client& client, std::string response);
  // The response for one request head (everything up to the blank line).
  std::string Respond(absl::string_view head);

  const UniqueFd listener_;
  const UniqueFd wake_read_;
  const UniqueFd wake_write_;
  Registry* const registry_;
  const Options options_;
  const std::string address_;
  std::thread thread_;
};

// Binds `listen` ("HOST:PORT", the --metrics_listen flag) and starts a
// server for `registry` on it. EADDRINUSE names the address when the port
// is busy; InvalidArgument for a malformed address.
absl::StatusOr<std::unique_ptr<MetricsHttpServer>> StartMetricsServer(absl::string_view listen,
                                                                      Registry* registry);

// The first half of StartMetricsServer, for a daemon that must bind before
// it forks and start threads after: the listening socket for `listen`.
absl::StatusOr<UniqueFd> ListenForMetrics(absl::string_view listen);

}  // namespace ckptfs::metrics

#endif  // CKPTFS_COMMON_METRICS_HTTP_SERVER_H_
