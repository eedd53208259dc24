// See rocksdb_kv_store.h.
#include "server/meta/rocksdb_kv_store.h"

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "rocksdb/db.h"
#include "rocksdb/options.h"
#include "rocksdb/write_batch.h"
#include "server/meta/keys.h"

namespace ckptfs::meta {
namespace {

constexpr char kRevisionFamily[] = "revision";
constexpr char kRevisionKey[] = "revision";
constexpr size_t kVersionBytes = 8;
// A commit compares this many keys or more with one iterator walk, fewer
// with a lookup each (an iterator costs more to set up than a few lookups).
constexpr size_t kMinComparesWalked = 16;
// How far the walk steps with Next before it seeks the next key instead.
constexpr int kMaxNextsBeforeSeek = 8;

std::string EncodeVersion(int64_t version) { return EncodeU64(static_cast<uint64_t>(version)); }

// REQUIRES: bytes.size() >= kVersionBytes.
int64_t DecodeVersion(absl::string_view bytes) {
  return static_cast<int64_t>(*DecodeU64(bytes.substr(0, kVersionBytes)));
}

absl::Status FromRocks(const rocksdb::Status& status, absl::string_view what) {
  return ErrnoStatus(EIO, absl::StrCat(what, ": rocksdb: ", status.ToString()));
}

absl::StatusOr<VersionedValue> DecodeStored(absl::string_view key, absl::string_view stored) {
  if (stored.size() < kVersionBytes) {
    return ErrnoStatus(EIO, absl::StrCat("corrupt KV value for key of ", key.size(),
                                         " bytes: ", stored.size(), " bytes stored"));
  }
  VersionedValue out;
  out.version = DecodeVersion(stored.substr(0, kVersionBytes));
  out.value = std::string(stored.substr(kVersionBytes));
  return out;
}

// The smallest key greater than every key starting with `prefix`; "" when
// there is none (prefix empty or all 0xff).
std::string PrefixEnd(absl::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    auto last = static_cast<unsigned char>(end.back());
    if (last != 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return end;
}

}  // namespace

RocksDbKvStore::RocksDbKvStore(std::string path, const Options& options)
    : path_(std::move(path)), options_(options) {}

RocksDbKvStore::~RocksDbKvStore() {
  if (db_ == nullptr) return;
  if (data_cf_ != nullptr) db_->DestroyColumnFamilyHandle(data_cf_).PermitUncheckedError();
  if (revision_cf_ != nullptr) {
    db_->DestroyColumnFamilyHandle(revision_cf_).PermitUncheckedError();
  }
  db_->Close().PermitUncheckedError();
}

absl::StatusOr<std::unique_ptr<RocksDbKvStore>> RocksDbKvStore::Open(const std::string& path,
                                                                     const Options& options) {
  std::unique_ptr<RocksDbKvStore> store(new RocksDbKvStore(path, options));

  rocksdb::DBOptions db_options;
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  // Keep the service's own footprint small; metadata is tiny next to data.
  db_options.keep_log_file_num = 4;
  db_options.max_manifest_file_size = 64 << 20;
  rocksdb::ColumnFamilyOptions cf_options;
  std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, cf_options},
      {kRevisionFamily, cf_options},
  };
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status status = rocksdb::DB::Open(db_options, path, families, &handles, &raw);
  if (!status.ok()) {
    std::string text = status.ToString();
    if (status.IsIOError() && absl::StrContains(text, "LOCK")) {
      return ErrnoStatus(
          EBUSY, absl::StrCat("data dir ", path, " is in use by another process (", text, ")"));
    }
    return FromRocks(status, absl::StrCat("open metadata store in ", path));
  }
  store->db_.reset(raw);
  store->data_cf_ = handles[0];
  store->revision_cf_ = handles[1];

  std::string stored;
  status = raw->Get(rocksdb::ReadOptions(), store->revision_cf_, kRevisionKey, &stored);
  if (status.ok()) {
    if (stored.size() != kVersionBytes) {
      return ErrnoStatus(EIO, absl::StrCat("corrupt revision record in ", path));
    }
    absl::MutexLock lock(&store->commit_mu_);
    store->revision_ = DecodeVersion(stored);
  } else if (!status.IsNotFound()) {
    return FromRocks(status, absl::StrCat("read revision in ", path));
  }
  return store;
}

absl::StatusOr<std::optional<VersionedValue>> RocksDbKvStore::Get(absl::string_view key) {
  std::string stored;
  rocksdb::Status status =
      db_->Get(rocksdb::ReadOptions(), data_cf_, rocksdb::Slice(key.data(), key.size()), &stored);
  if (status.IsNotFound()) return std::optional<VersionedValue>();
  if (!status.ok()) return FromRocks(status, "get");
  absl::StatusOr<VersionedValue> value = DecodeStored(key, stored);
  if (!value.ok()) return value.status();
  return std::optional<VersionedValue>(*std::move(value));
}

absl::StatusOr<std::vector<KeyValue>> RocksDbKvStore::Scan(absl::string_view prefix,
                                                           absl::string_view start_after,
                                                           size_t limit) {
  std::vector<KeyValue> out;
  if (limit == 0) return out;
  const std::string end = PrefixEnd(prefix);
  rocksdb::Slice end_slice(end);
  rocksdb::ReadOptions read_options;
  if (!end.empty()) read_options.iterate_upper_bound = &end_slice;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read_options, data_cf_));
  const std::string start = absl::StrCat(prefix, start_after);
  for (it->Seek(start); it->Valid() && out.size() < limit; it->Next()) {
    absl::string_view key(it->key().data(), it->key().size());
    if (!absl::StartsWith(key, prefix)) break;
    if (!start_after.empty() && key == start) continue;
    absl::StatusOr<VersionedValue> value =
        DecodeStored(key, absl::string_view(it->value().data(), it->value().size()));
    if (!value.ok()) return value.status();
    out.push_back(KeyValue{std::string(key), std::move(value->value), value->version});
  }
  if (!it->status().ok()) return FromRocks(it->status(), "scan");
  return out;
}

absl::Status RocksDbKvStore::CheckCompares(const Txn& txn) {
  const std::vector<Compare> compares = txn.SortedCompares();
  if (compares.size() < kMinComparesWalked) {
    for (const Compare& compare : compares) {
      std::string stored;
      rocksdb::Status status =
          db_->Get(rocksdb::ReadOptions(), data_cf_,
                   rocksdb::Slice(compare.key.data(), compare.key.size()), &stored);
      int64_t version = 0;
      if (status.ok()) {
        if (stored.size() < kVersionBytes) return DecodeStored(compare.key, stored).status();
        version = DecodeVersion(stored);
      } else if (!status.IsNotFound()) {
        return FromRocks(status, "commit compare");
      }
      if (version != compare.version) return TxnConflictError(compare.key);
    }
    return absl::OkStatus();
  }
  // Many keys: one iterator walks them in key order. Keys close together
  // (a checkpoint's inodes, numbered in a row) are reached with Next, which
  // costs far less than a lookup each; a key further on is sought.
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), data_cf_));
  bool sought = false;
  for (const Compare& compare : compares) {
    const rocksdb::Slice target(compare.key.data(), compare.key.size());
    if (sought) {
      // Past the end stays past the end: every key from here on is absent.
      for (int step = 0; step < kMaxNextsBeforeSeek && it->Valid() && it->key().compare(target) < 0;
           ++step) {
        it->Next();
      }
    }
    if (!sought || (it->Valid() && it->key().compare(target) < 0)) {
      it->Seek(target);
      sought = true;
    }
    if (!it->status().ok()) return FromRocks(it->status(), "commit compare");
    int64_t version = 0;
    if (it->Valid() && it->key() == target) {
      if (it->value().size() < kVersionBytes) {
        return DecodeStored(compare.key, absl::string_view(it->value().data(), it->value().size()))
            .status();
      }
      version = DecodeVersion(absl::string_view(it->value().data(), kVersionBytes));
    }
    if (version != compare.version) return TxnConflictError(compare.key);
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> RocksDbKvStore::Commit(const Txn& txn) {
  absl::MutexLock lock(&commit_mu_);
  // Commits are serialized by commit_mu_, so the store cannot change between
  // these compares and the write below.
  if (absl::Status compared = CheckCompares(txn); !compared.ok()) return compared;
  if (txn.writes().empty()) return revision_;

  const int64_t revision = revision_ + 1;
  const std::string version_bytes = EncodeVersion(revision);
  rocksdb::WriteBatch batch;
  for (const auto& [key, value] : txn.writes()) {
    rocksdb::Status status;
    if (value.has_value()) {
      // Stored value = version | value, assembled by RocksDB without a copy here.
      rocksdb::Slice key_slice(key);
      rocksdb::Slice parts[2] = {rocksdb::Slice(version_bytes), rocksdb::Slice(*value)};
      status =
          batch.Put(data_cf_, rocksdb::SliceParts(&key_slice, 1), rocksdb::SliceParts(parts, 2));
    } else {
      status = batch.Delete(data_cf_, key);
    }
    if (!status.ok()) return FromRocks(status, "commit batch");
  }
  rocksdb::Status status = batch.Put(revision_cf_, kRevisionKey, version_bytes);
  if (!status.ok()) return FromRocks(status, "commit batch");

  rocksdb::WriteOptions write_options;
  write_options.sync = options_.sync || txn.durable();
  status = db_->Write(write_options, &batch);
  if (!status.ok()) return FromRocks(status, "commit");
  revision_ = revision;
  return revision;
}

}  // namespace ckptfs::meta
