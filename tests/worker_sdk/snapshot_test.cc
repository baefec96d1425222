// Snapshots: round trip, pruning, corruption and version mismatch, and a writer killed with
// SIGKILL in the middle of a write.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>

#include "ddp/ddp.h"
#include "tests/worker_sdk/multiproc.h"
#include "tests/worker_sdk/single_process_group.h"
#include "tests/worker_sdk/test_models.h"
#include "worker_sdk/src/snapshot_format.h"

namespace ddp_test {
namespace {

namespace fs = std::filesystem;

bool same_parameters(torch::nn::Module& a, torch::nn::Module& b) {
  auto pa = a.parameters(), pb = b.parameters();
  if (pa.size() != pb.size()) return false;
  for (std::size_t i = 0; i < pa.size(); ++i) {
    if (!torch::equal(pa[i], pb[i])) return false;
  }
  return true;
}

void scale_parameters(torch::nn::Module& m, double factor) {
  torch::NoGradGuard no_grad;
  for (auto& p : m.parameters()) p.mul_(factor);
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(SnapshotTest, RoundTripRestoresModelOptimizerProgressAndRng) {
  TempDir dir;
  auto group = single_process_group();
  auto net = make_mixed_net();
  torch::optim::Adam optimizer(net->parameters(), torch::optim::AdamOptions(0.01));
  auto b = global_batch(0, 1, kPerRank);
  torch::nn::functional::cross_entropy(net(b.x, true), b.y).backward();
  optimizer.step();  // gives Adam per-parameter state

  ddp::Snapshotter snapshots(group, {dir.path(), 3});
  torch::manual_seed(5);
  snapshots.save(*net, &optimizer, {2, 7, 31, {{"best_accuracy", "0.91"}}});
  auto draw_after_save = torch::rand({4});

  auto restored = MixedNet();
  torch::optim::Adam restored_optimizer(restored->parameters(), torch::optim::AdamOptions(0.01));
  torch::manual_seed(999);
  auto progress = snapshots.load_latest(*restored, &restored_optimizer);
  ASSERT_TRUE(progress.has_value());
  EXPECT_EQ(progress->epoch, 2);
  EXPECT_EQ(progress->step_in_epoch, 7);
  EXPECT_EQ(progress->global_step, 31);
  EXPECT_EQ(progress->user.at("best_accuracy"), "0.91");
  EXPECT_TRUE(same_parameters(*net, *restored));
  EXPECT_TRUE(torch::equal(torch::rand({4}), draw_after_save)) << "RNG state not restored";

  // Optimizer state restored: one more identical step gives identical weights.
  for (auto* m : {&net, &restored}) {
    (*m)->zero_grad();
    torch::nn::functional::cross_entropy((*m)(b.x, true), b.y).backward();
  }
  optimizer.step();
  restored_optimizer.step();
  EXPECT_TRUE(same_parameters(*net, *restored));
}

TEST(SnapshotTest, EmptyDirectoryIsAFreshStartAndOnlyTheLastKAreKept) {
  TempDir dir;
  auto group = single_process_group();
  auto net = make_mixed_net();
  ddp::Snapshotter snapshots(group, {dir.path() / "snaps", 2});
  EXPECT_FALSE(snapshots.load_latest(*net, nullptr).has_value());
  for (int step = 1; step <= 4; ++step) snapshots.save(*net, nullptr, {0, step, step, {}});
  auto files = snapshots.list();
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].filename(), "snapshot-000000000004.ddpsnap");
  EXPECT_EQ(files[1].filename(), "snapshot-000000000003.ddpsnap");
}

TEST(SnapshotTest, CorruptNewestIsReportedAndThePreviousLoaded) {
  TempDir dir;
  auto group = single_process_group();
  auto net = make_mixed_net();
  ddp::Snapshotter snapshots(group, {dir.path(), 3});
  snapshots.save(*net, nullptr, {0, 1, 1, {}});
  auto at_step_1 = MixedNet();
  {
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < net->parameters().size(); ++i) {
      at_step_1->parameters()[i].copy_(net->parameters()[i]);
    }
  }
  scale_parameters(*net, 3.0);
  auto newest = snapshots.save(*net, nullptr, {0, 2, 2, {}});
  snapshots.wait();  // published (save() writes in the background)
  std::string bytes = read_bytes(newest);
  bytes[bytes.size() - 10] ^= 0x5a;  // one flipped byte in the payload
  write_bytes(newest, bytes);

  auto loaded = MixedNet();
  auto progress = snapshots.load_latest(*loaded, nullptr);
  ASSERT_TRUE(progress.has_value());
  EXPECT_EQ(progress->global_step, 1);
  EXPECT_TRUE(same_parameters(*loaded, *at_step_1));
  ASSERT_EQ(snapshots.load_warnings().size(), 1u);
  EXPECT_NE(
      snapshots.load_warnings()[0].find("snapshot-000000000002.ddpsnap: rank 0: checksum mismatch"),
      std::string::npos)
      << snapshots.load_warnings()[0];
}

TEST(SnapshotTest, VersionMismatchAndTruncationGiveClearMessages) {
  TempDir dir;
  auto group = single_process_group();
  auto net = make_mixed_net();
  ddp::Snapshotter snapshots(group, {dir.path(), 3});
  auto path = snapshots.save(*net, nullptr, {0, 1, 1, {}});
  snapshots.wait();
  const std::string good = read_bytes(path);

  std::string future = good;
  future.replace(0, 9, "DDPSNAP 7");
  write_bytes(path, future);
  try {
    snapshots.load_latest(*net, nullptr);
    FAIL() << "loaded a snapshot of format version 7";
  } catch (const ddp::Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(e.operation(), "snapshot.load");
    EXPECT_NE(message.find("format version 7, this SDK reads version 1"), std::string::npos)
        << message;
    EXPECT_NE(message.find("snapshot-000000000001.ddpsnap"), std::string::npos) << message;
  }

  write_bytes(path, good.substr(0, good.size() / 2));
  try {
    snapshots.load_latest(*net, nullptr);
    FAIL() << "loaded a truncated snapshot";
  } catch (const ddp::Error& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
}

// Dies by SIGKILL while writing step 2 (after the temp file is durable, before the rename),
// on the writer thread when `background`; step 1 must still load.
void expect_kill_during_write_leaves_previous(bool background) {
  TempDir dir;
  const auto snaps = dir.path() / "snaps";
  const auto expected_file = dir.path() / "expected.pt";
  ProcessSpec spec;
  spec.argv = {SDK_TEST_WORKER, "snapshot_kill_during_write", "dir=" + snaps.string(),
               "expected=" + expected_file.string(),
               std::string("background=") + (background ? "1" : "0")};
  spec.output_file = dir.path() / "worker.log";
  auto results = run_processes({spec});
  ASSERT_EQ(results[0].term_signal, SIGKILL) << results[0].describe() << "\n" << results[0].output;

  // The interrupted write left its durable temp file behind, unpublished.
  int temp_files = 0;
  for (const auto& entry : fs::directory_iterator(snaps)) {
    temp_files += entry.path().filename().string().rfind(".tmp-snapshot-", 0) == 0;
  }
  EXPECT_EQ(temp_files, 1);

  auto group = single_process_group();
  ddp::Snapshotter snapshots(group, {snaps, 3});
  ASSERT_EQ(snapshots.list().size(), 1u);
  auto net = MixedNet();
  auto progress = snapshots.load_latest(*net, nullptr);
  ASSERT_TRUE(progress.has_value());
  EXPECT_EQ(progress->global_step, 1);
  EXPECT_EQ(progress->user.at("note"), "complete");
  std::vector<torch::Tensor> expected;
  torch::load(expected, expected_file.string());
  auto params = net->parameters();
  ASSERT_EQ(params.size(), expected.size());
  for (std::size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(torch::equal(params[i], expected[i]));

  // The next save clears the stale temp file.
  snapshots.save(*net, nullptr, {0, 3, 3, {}});
  snapshots.wait();
  for (const auto& entry : fs::directory_iterator(snaps)) {
    EXPECT_NE(entry.path().filename().string().rfind(".tmp-snapshot-", 0), 0u) << entry.path();
  }
}

TEST(SnapshotTest, KillDuringWriteLeavesThePreviousSnapshotLoadable) {
  expect_kill_during_write_leaves_previous(/*background=*/false);
}

TEST(SnapshotTest, KillDuringABackgroundWriteLeavesThePreviousSnapshotLoadable) {
  expect_kill_during_write_leaves_previous(/*background=*/true);
}

// Each rank reads its own copy (<dir>/rank_<r>, as on node-local disks) of the snapshots of
// global steps 4 and 8; `damage` then spoils some of them (it gets <dir>).
std::vector<ProcessResult> load_on_two_ranks(const TempDir& dir,
                                             const std::function<void(const fs::path&)>& damage) {
  {
    auto group = single_process_group();
    auto net = make_mixed_net();
    ddp::Snapshotter snapshots(group, {dir.path() / "rank_0", 3});
    snapshots.save(*net, nullptr, {0, 4, 4, {}});
    scale_parameters(*net, 2.0);
    snapshots.save(*net, nullptr, {0, 8, 8, {}});
  }
  fs::copy(dir.path() / "rank_0", dir.path() / "rank_1", fs::copy_options::recursive);
  damage(dir.path());
  fs::create_directories(dir.path() / "logs");
  return run_ranks(SDK_TEST_WORKER, {"snapshot_agree", "dir=" + dir.path().string()}, 2,
                   dir.path() / "logs");
}

void flip_a_payload_byte(const fs::path& file) {
  std::string bytes = read_bytes(file);
  bytes[bytes.size() - 10] ^= 0x5a;
  write_bytes(file, bytes);
}

// Issue 37: a node whose copy is damaged gets rank 0's, stores it, and every rank loads the
// newest snapshot.
TEST(SnapshotAgreementTest, ADamagedCopyIsReplacedByAPeersAndTheNewestLoaded) {
  TempDir dir;
  const auto newest = [&](int rank) {
    return dir.path() / ("rank_" + std::to_string(rank)) / "snapshot-000000000008.ddpsnap";
  };
  auto results = load_on_two_ranks(dir, [&](const fs::path&) { flip_a_payload_byte(newest(1)); });
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << all_output(results);
    EXPECT_NE(r.output.find("loaded global step 8"), std::string::npos) << all_output(results);
    EXPECT_NE(r.output.find("snapshot-000000000008.ddpsnap: rank 1: checksum mismatch"),
              std::string::npos)
        << all_output(results);
    EXPECT_NE(r.output.find("the file is corrupt; received from rank 0"), std::string::npos)
        << all_output(results);
  }
  EXPECT_EQ(read_bytes(newest(1)), read_bytes(newest(0)));
}

// A truncated copy and a missing one are both replaced.
TEST(SnapshotAgreementTest, ATruncatedOrMissingCopyIsReplacedByAPeers) {
  TempDir dir;
  auto results = load_on_two_ranks(dir, [](const fs::path& root) {
    const auto newest = root / "rank_0" / "snapshot-000000000008.ddpsnap";
    write_bytes(newest, read_bytes(newest).substr(0, 100));
    fs::remove(root / "rank_1" / "snapshot-000000000004.ddpsnap");
  });
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << all_output(results);
    EXPECT_NE(r.output.find("loaded global step 8"), std::string::npos) << all_output(results);
    EXPECT_NE(r.output.find("rank 0: truncated"), std::string::npos) << all_output(results);
    EXPECT_NE(r.output.find("received from rank 1"), std::string::npos) << all_output(results);
  }
  EXPECT_EQ(read_bytes(dir.path() / "rank_0" / "snapshot-000000000008.ddpsnap"),
            read_bytes(dir.path() / "rank_1" / "snapshot-000000000008.ddpsnap"));
}

TEST(SnapshotAgreementTest, WithoutAnIntactCopyAnywhereAllRanksFailWithOneMessage) {
  TempDir dir;
  auto results = load_on_two_ranks(dir, [](const fs::path& root) {
    fs::remove(root / "rank_1" / "snapshot-000000000008.ddpsnap");
    flip_a_payload_byte(root / "rank_0" / "snapshot-000000000008.ddpsnap");
    for (const char* rank : {"rank_0", "rank_1"}) {
      const auto older = root / rank / "snapshot-000000000004.ddpsnap";
      write_bytes(older, read_bytes(older).substr(0, 100));
    }
  });
  std::vector<std::string> errors;
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << all_output(results);
    const auto at = r.output.find("snapshot.load: no snapshot in");
    ASSERT_NE(at, std::string::npos) << all_output(results);
    // The same message, but for each rank's own directory name.
    std::string message = r.output.substr(at);
    for (auto p = message.find("/rank_"); p != std::string::npos;
         p = message.find("/rank_", p + 1)) {
      message[p + 6] = 'X';
    }
    errors.push_back(message);
  }
  EXPECT_EQ(errors[0], errors[1]);
  EXPECT_NE(errors[0].find("snapshot-000000000008.ddpsnap: rank 0: checksum mismatch"),
            std::string::npos)
      << errors[0];
  EXPECT_NE(errors[0].find("snapshot-000000000008.ddpsnap: rank 1: missing on this rank"),
            std::string::npos)
      << errors[0];
  EXPECT_NE(errors[0].find("snapshot-000000000004.ddpsnap: rank 1: truncated"), std::string::npos)
      << errors[0];
}

}  // namespace
}  // namespace ddp_test
