// See server.h.
#include "server/storage/server.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "common/log.h"

namespace ckptfs::storage {

absl::StatusOr<std::unique_ptr<Server>> Server::Start(ChunkStore& store, const HostPort& listen,
                                                      Options options) {
  auto fd = ListenTcp(listen);
  if (!fd.ok()) return fd.status();
  auto port = LocalPort(fd->get());
  if (!port.ok()) return port.status();
  options.net_threads = std::max<size_t>(options.net_threads, 1);
  options.disk_threads = std::max<size_t>(options.disk_threads, 1);
  options.buffer_pool_bytes = std::max(options.buffer_pool_bytes, kMinBufferPoolBytes);
  options.max_requests_per_connection = std::max<size_t>(options.max_requests_per_connection, 1);
  std::unique_ptr<Server> server(new Server(store, HostPort{listen.host, *port}, options));
  server->listen_fd_ = *std::move(fd);

  auto pool = PayloadArena::Create(options.buffer_pool_bytes);
  if (!pool.ok()) return pool.status();
  server->pool_ = *std::move(pool);
  auto disk = DiskWorkers::Start(options.disk_threads, server->handler_, server->pool_->regions());
  if (!disk.ok()) return disk.status();
  server->disk_ = *std::move(disk);

  EventLoop::Options loop_options;
  loop_options.ring_entries = options.ring_entries;
  loop_options.zero_copy_send = options.zero_copy_send;
  loop_options.stall_timeout = options.stall_timeout;
  loop_options.max_in_flight = options.max_requests_per_connection;
  loop_options.nonblocking_sockets = options.nonblocking_sockets;
  loop_options.credential = options.credential;
  loop_options.server_credential = options.server_credential;
  const EventLoop::Shared shared{server->pool_.get(), server->disk_.get(), &server->connections_};
  for (size_t i = 0; i < options.net_threads; ++i) {
    auto loop = EventLoop::Create(loop_options, shared);
    if (!loop.ok()) return loop.status();  // the destructor stops what started
    server->loops_.push_back(*std::move(loop));
  }
  Server* raw = server.get();
  server->loops_[0]->AcceptOn(server->listen_fd_.get(), [raw](UniqueFd socket, std::string peer) {
    raw->OnAccept(std::move(socket), std::move(peer));
  });
  for (auto& loop : server->loops_) loop->Start();
  server->metric_callbacks_ = AddGauges(server->pool_.get(), &store);
  return server;
}

std::vector<metrics::CallbackHandle> Server::AddGauges(PayloadArena* pool, ChunkStore* store) {
  metrics::Registry& r = metrics::Registry::Default();
  auto gauge = [&r](const char* name, const char* help) -> metrics::Gauge& {
    return r.Gauge(name, help, {}).WithLabels({});
  };
  std::vector<metrics::CallbackHandle> handles;
  handles.push_back(
      r.AddGaugeCallback(gauge("ckptfs_storage_buffer_pool_capacity_bytes",
                               "Payload memory of the buffer pool (--buffer_pool_mb)."),
                         [pool] { return static_cast<double>(pool->capacity()); }));
  handles.push_back(
      r.AddGaugeCallback(gauge("ckptfs_storage_buffer_pool_used_bytes",
                               "Buffer-pool bytes held by requests in flight."),
                         [pool] { return static_cast<double>(pool->stats().in_use); }));
  handles.push_back(
      r.AddGaugeCallback(gauge("ckptfs_storage_buffer_pool_waiting_requests",
                               "Requests waiting for buffer-pool memory."),
                         [pool] { return static_cast<double>(pool->stats().waiting); }));
  // statvfs at scrape time.
  handles.push_back(r.AddGaugeCallback(
      gauge("ckptfs_storage_disk_capacity_bytes", "Size of the file system holding the chunks."),
      [store] {
        absl::StatusOr<SpaceUsage> space = store->Space();
        return space.ok() ? static_cast<double>(space->capacity_bytes) : 0.0;
      }));
  handles.push_back(r.AddGaugeCallback(
      gauge("ckptfs_storage_disk_free_bytes",
            "Bytes of the chunks' file system still available to the server."),
      [store] {
        absl::StatusOr<SpaceUsage> space = store->Space();
        return space.ok() ? static_cast<double>(space->capacity_bytes - space->used_bytes) : 0.0;
      }));
  return handles;
}

void Server::OnAccept(UniqueFd socket, std::string peer) {
  EventLoop& loop = *loops_[next_loop_];
  next_loop_ = (next_loop_ + 1) % loops_.size();
  StrangerLimit::Ticket stranger;
  if (!options_.credential.empty()) stranger = strangers_.Admit(peer, socket.get());
  if (connections_.fetch_add(1) >= options_.max_connections) {
    connections_.fetch_sub(1);
    loop.Adopt(std::move(socket), std::move(peer),
               ErrnoStatus(EAGAIN, absl::StrCat("storage server ", address_.ToString(), " serves ",
                                                options_.max_connections,
                                                " connections already; try again later")),
               /*served=*/false, std::move(stranger));
    return;
  }
  loop.Adopt(std::move(socket), std::move(peer), absl::OkStatus(), /*served=*/true,
             std::move(stranger));
}

Server::Stats Server::stats() const {
  Stats stats;
  for (const auto& loop : loops_) {
    const EventLoop::Stats s = loop->stats();
    stats.sq_full += s.sq_full;
    stats.sends += s.sends;
    stats.zero_copy_sends += s.zero_copy_sends;
    stats.recvs += s.recvs;
    stats.retries += s.retries;
  }
  stats.fixed_disk_buffers = disk_ != nullptr && disk_->fixed_buffers();
  return stats;
}

void Server::Stop() {
  if (stopped_) return;
  stopped_ = true;
  metric_callbacks_.clear();
  // No new connections: the accepting loop's accept fails, and loop 0
  // stops first so that nothing is handed to a stopped loop.
  if (listen_fd_.valid()) ::shutdown(listen_fd_.get(), SHUT_RDWR);
  {
    const Stats s = stats();
    CKPTFS_LOG(kInfo) << "data path served with " << s.recvs << " receives, " << s.sends
                      << " sends (" << s.zero_copy_sends << " zero-copy), " << s.retries
                      << " retried, submission queue full " << s.sq_full << " times";
  }
  for (auto& loop : loops_) loop->Stop();  // each waits for its requests on disk
  if (disk_) disk_->Stop();
  loops_.clear();
  disk_.reset();
  listen_fd_.Reset();
}

}  // namespace ckptfs::storage
