// ClientServices: what a Client's parts borrow from it — the metadata
// client, the chunk transport and its record of unsynced writes, the
// servers that failed reads lately, the I/O threads, the chunk buffer
// pool, the options and the open file registry. The Client (client_impl.h)
// owns them all and outlives every user of this struct.
//
// Thread-safety: the pointees are thread-safe; the struct is immutable.
#ifndef CKPTFS_CLIENT_CLIENT_SERVICES_H_
#define CKPTFS_CLIENT_CLIENT_SERVICES_H_

#include "client/buffer_pool.h"
#include "client/chunk_transport.h"
#include "client/client.h"
#include "client/io_executor.h"
#include "client/meta_client.h"
#include "client/open_file_registry.h"
#include "client/unsynced_writes.h"

namespace ckptfs::client {

class FailedServers;  // replica_io.h

struct ClientServices {
  MetaClient* meta = nullptr;
  ChunkTransport* transport = nullptr;
  FailedServers* failed_servers = nullptr;  // null: none kept
  // What the transport records of unsynced writes; null: none.
  UnsyncedWrites* unsynced_writes = nullptr;
  IoExecutor* executor = nullptr;
  BufferPool* buffers = nullptr;
  OpenFileRegistry* registry = nullptr;
  ClientOptions options;
};

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_CLIENT_SERVICES_H_
