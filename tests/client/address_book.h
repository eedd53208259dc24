// AddressBook: for tests of the chunk transports, the metadata service
// in-process (client/testing/in_process_meta.h) with no storage servers but
// those the test registers at addresses of its choosing (its stand-ins), and
// a MetaClient of it whose ListServers names them. Registering a new data
// directory (uuid) gives the next id, 1 first; registering a known one again
// moves that server to the new address, as a restarted server's
// registration does.
//
// Thread-safety: Register from the test thread; meta() as a MetaClient.
#ifndef CKPTFS_TESTS_CLIENT_ADDRESS_BOOK_H_
#define CKPTFS_TESTS_CLIENT_ADDRESS_BOOK_H_

#include <cstdint>
#include <memory>
#include <string>

#include "client/meta_client.h"
#include "client/testing/in_process_meta.h"
#include "gtest/gtest.h"

namespace ckptfs::client {

class AddressBook {
 public:
  AddressBook() {
    testing::InProcessMetaService::Options options;
    options.storage_servers = 0;
    auto service = testing::InProcessMetaService::Start(options);
    EXPECT_TRUE(service.ok()) << service.status();
    if (!service.ok()) return;
    service_ = *std::move(service);
    meta_ = service_->NewClient();
  }

  // The id of the server of data directory `uuid`, now at `address`.
  uint32_t Register(const std::string& uuid, const std::string& address) {
    meta::RegisterServerRequest request;
    request.set_uuid(uuid);
    request.set_address(address);
    auto id = service_->RegisterServer(request);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : 0;
  }

  MetaClient* meta() { return meta_.get(); }

 private:
  std::unique_ptr<testing::InProcessMetaService> service_;
  std::unique_ptr<MetaClient> meta_;  // goes first
};

}  // namespace ckptfs::client

#endif  // CKPTFS_TESTS_CLIENT_ADDRESS_BOOK_H_
