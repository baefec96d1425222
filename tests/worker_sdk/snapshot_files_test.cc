// A snapshot directory's files without LibTorch: publication, retention, temp files, the
// directory identity that decides who writes, and the background writer's error reporting.
#include <gtest/gtest.h>

#include <fstream>

#include "tests/support/temp_dir.h"
#include "worker_sdk/src/snapshot_files.h"
#include "worker_sdk/src/snapshot_format.h"
#include "worker_sdk/src/snapshot_writer.h"

namespace ddp::detail {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(SnapshotFilesTest, PublishKeepsExactlyTheNewestKAndNoTempFiles) {
  ddprun::testing::TempDir tmp;
  const fs::path dir = fs::path(tmp.path()) / "snaps";
  for (int step = 1; step <= 5; ++step) {
    ASSERT_EQ(publish_snapshot(dir, step, "bytes " + std::to_string(step), 2), "");
  }
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{"snapshot-000000000004.ddpsnap",
                                                     "snapshot-000000000005.ddpsnap"}));
  const auto listed = list_snapshots(dir);
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(snapshot_step_of(listed[0]), 5);
}

TEST(SnapshotFilesTest, AWriterDestroyedBeforeCommitLeavesNothingBehind) {
  ddprun::testing::TempDir tmp;
  const fs::path dir = tmp.path();
  {
    DurableFile file(dir, 7);
    ASSERT_EQ(file.open(), "");
    ASSERT_EQ(file.append("partial", 7), "");
  }
  EXPECT_TRUE(names_in(dir).empty());
}

TEST(SnapshotFilesTest, StaleTempFilesOfThisHostAreRemovedOthersKept) {
  ddprun::testing::TempDir tmp;
  const fs::path dir = tmp.path();
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::ofstream(dir / (std::string(".tmp-snapshot-") + host + "-3-1")) << "stale";
  std::ofstream(dir / ".tmp-snapshot-some-other-host-3-1") << "another writer's";
  ASSERT_EQ(publish_snapshot(dir, 4, "bytes", 3), "");
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{".tmp-snapshot-some-other-host-3-1",
                                                     "snapshot-000000000004.ddpsnap"}));
}

TEST(SnapshotFilesTest, DirectoryIdentityIsEqualForOneDirectoryAndDiffersForACopy) {
  ddprun::testing::TempDir tmp;
  const fs::path a = fs::path(tmp.path()) / "a", b = fs::path(tmp.path()) / "b";
  std::string error;
  const std::string id_a = directory_identity(a, &error);
  ASSERT_EQ(error, "");
  EXPECT_EQ(directory_identity(a / "." / "", &error), id_a);
  fs::create_directory_symlink(a, fs::path(tmp.path()) / "link");
  EXPECT_EQ(directory_identity(fs::path(tmp.path()) / "link", &error), id_a);
  EXPECT_NE(directory_identity(b, &error), id_a);
  std::ofstream(fs::path(tmp.path()) / "file") << "not a directory";
  EXPECT_EQ(directory_identity(fs::path(tmp.path()) / "file" / "sub", &error), "");
  EXPECT_NE(error, "");
}

TEST(SnapshotWriterTest, BackgroundWritesLandInOrderAndAFailureIsReportedOnce) {
  ddprun::testing::TempDir tmp;
  const fs::path dir = tmp.path();
  SnapshotWriter writer;
  for (int step = 1; step <= 3; ++step) {
    SnapshotWrite write;
    write.directory = dir;
    write.header.global_step = step;
    write.payload = "payload";
    write.keep_last = 2;
    writer.start(std::move(write));
  }
  EXPECT_EQ(writer.finish(), "");
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{"snapshot-000000000002.ddpsnap",
                                                     "snapshot-000000000003.ddpsnap"}));
  std::string error;
  const std::string bytes = read_whole_file(dir / "snapshot-000000000003.ddpsnap", &error);
  ASSERT_TRUE(decode_snapshot(bytes).ok());

  std::ofstream(dir / "file") << "not a directory";
  SnapshotWrite bad;
  bad.directory = dir / "file" / "sub";
  writer.start(std::move(bad));
  EXPECT_NE(writer.finish().find("cannot create"), std::string::npos);
  EXPECT_EQ(writer.finish(), "");
}

}  // namespace
}  // namespace ddp::detail
