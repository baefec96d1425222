// The files of a snapshot directory: names, listing, durable publication, retention and the
// directory's identity. No LibTorch; errors are values (a message, empty on success).
//
//   <directory>/snapshot-<global step, 12 digits>.ddpsnap     a complete snapshot
//   <directory>/.tmp-snapshot-<host>-<step>-<pid>             a write in progress
//
// A temp name carries its host so that writers on different hosts sharing one directory (a
// shared file system) never touch each other's temp files; on one host a directory has one
// writer (see DirectoryIdentity), so any temp file of this host found there is stale.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ddp::detail {

std::string snapshot_file_name(int64_t global_step);
// The global step a complete snapshot's name encodes, or -1 for any other file.
int64_t snapshot_step_of(const std::filesystem::path& path);
// Complete snapshots in `dir`, newest first; empty when the directory is missing.
std::vector<std::filesystem::path> list_snapshots(const std::filesystem::path& dir);

// The directory's identity: "<host>:<device>:<inode>" after creating it. Ranks whose
// identities are equal see the same directory (one node, or several ranks of one host on a
// shared mount); ranks on different hosts never compare equal, even on a shared file system,
// and then write the same bytes side by side (which the temp names above make safe).
// Returns "" and sets *error when the directory cannot be created or examined.
std::string directory_identity(const std::filesystem::path& dir, std::string* error);

// Publishes one snapshot file atomically: a temp file in the directory, written in pieces by
// append(), then commit(): fsync, rename to the final name, fsync of the directory. A crash
// (or a writer destroyed without commit) at any point leaves the previous file of that name,
// if any, and every other snapshot intact. Not thread-safe; one writer per object.
class DurableFile {
 public:
  DurableFile(std::filesystem::path dir, int64_t global_step);
  ~DurableFile();
  DurableFile(const DurableFile&) = delete;
  DurableFile& operator=(const DurableFile&) = delete;

  // Each returns "" or what failed (with the path and errno text); after a failure the
  // others do nothing and return the same message.
  std::string open();
  std::string append(const char* data, std::size_t size);
  std::string commit();

  const std::filesystem::path& target() const { return target_; }

 private:
  std::filesystem::path dir_;
  std::filesystem::path target_;
  std::filesystem::path temp_;
  int fd_ = -1;  // open between open() and commit()
  std::string error_;
};

// Writes `bytes` as the snapshot of `global_step` in `dir` (creating it), removing this host's
// stale temp files first and keeping only the newest `keep_last` snapshots after. "" or what
// failed.
std::string publish_snapshot(const std::filesystem::path& dir, int64_t global_step,
                             const std::string& bytes, std::size_t keep_last);

// Deletes all but the newest `keep_last` complete snapshots of `dir`. A file another writer
// of a shared directory removed first is not an error.
void keep_newest(const std::filesystem::path& dir, std::size_t keep_last);

// Removes this host's temp files in `dir` (left by a writer that died).
void remove_stale_temps(const std::filesystem::path& dir);

// The whole file; "" in *error on success.
std::string read_whole_file(const std::filesystem::path& path, std::string* error);

// Fault injection for the SDK's own tests, through the environment so that no test hook is
// part of the library's ABI: with DDP_TEST_FAILPOINT=kill_before_snapshot_rename, the process
// SIGKILLs itself once a snapshot's temp file is durable, just before the rename that
// publishes it. Read at each commit (a test sets it between two saves); programs never set it.
void snapshot_fail_point_before_rename();

}  // namespace ddp::detail
