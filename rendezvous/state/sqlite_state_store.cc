#include "rendezvous/state/sqlite_state_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>

#include "rendezvous/state/sqlite_schema.h"

namespace ddprun::rdzv::state {
namespace {

namespace fs = std::filesystem;

Result<UniqueFd> lock_directory(const std::string& lock_path) {
  UniqueFd fd(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd.valid()) {
    return Status::unavailable(
        fmt::format("cannot open the state lock file {}: {}", lock_path, std::strerror(errno)));
  }
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return Status::refused(fmt::format(
          "another ddp-rendezvous already uses this state directory (it holds the lock on {}); "
          "stop it first, or give this one another --state-dir",
          lock_path));
    }
    return Status::unavailable(fmt::format("cannot lock {}: {}", lock_path, std::strerror(errno)));
  }
  return fd;
}

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Result<std::unique_ptr<SqliteStateStore>> SqliteStateStore::open(boost::asio::io_context& io,
                                                                 SqliteStateStoreOptions options) {
  if (options.directory.empty()) return Status::invalid_argument("the state directory is empty");
  std::error_code ec;
  fs::create_directories(options.directory, ec);
  if (ec) {
    return Status::unavailable(
        fmt::format("cannot create the state directory {}: {}", options.directory, ec.message()));
  }
  const std::string path = (fs::path(options.directory) / "rendezvous.db").string();
  auto lock = lock_directory(path + ".lock");
  if (!lock) return lock.status();
  auto db = SqliteDatabase::open(path);
  if (!db) return db.status();
  if (Status s = prepare_state_database(*db); !s) return s;
  auto upsert = db->prepare(
      "INSERT INTO jobs (job_id, state, updated_ms) VALUES (?1, ?2, ?3) ON CONFLICT (job_id) DO "
      "UPDATE SET state = excluded.state, updated_ms = excluded.updated_ms;");
  if (!upsert) return upsert.status();
  auto erase = db->prepare("DELETE FROM jobs WHERE job_id = ?1;");
  if (!erase) return erase.status();
  return std::unique_ptr<SqliteStateStore>(
      new SqliteStateStore(io, path, std::max<size_t>(1, options.max_batch), std::move(*lock),
                           std::move(*db), std::move(*upsert), std::move(*erase)));
}

SqliteStateStore::SqliteStateStore(boost::asio::io_context& io, std::string path, size_t max_batch,
                                   UniqueFd lock, SqliteDatabase db, SqliteStatement upsert,
                                   SqliteStatement erase)
    : io_(io),
      path_(std::move(path)),
      max_batch_(max_batch),
      lock_(std::move(lock)),
      db_(std::move(db)),
      upsert_(std::move(upsert)),
      erase_(std::move(erase)),
      writer_([this] { writer_loop(); }) {}

SqliteStateStore::~SqliteStateStore() {
  {
    std::lock_guard lock(queue_mutex_);
    stopping_ = true;
  }
  queue_cv_.notify_one();
  writer_.join();
}

Result<std::map<std::string, std::string>> SqliteStateStore::load_all() {
  std::lock_guard lock(db_mutex_);
  auto stmt = db_.prepare("SELECT job_id, state FROM jobs;");
  if (!stmt) return stmt.status();
  std::map<std::string, std::string> jobs;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.status().with_context("loading the rendezvous state");
    if (!*row) break;
    jobs.emplace(stmt->column_bytes(0), stmt->column_bytes(1));
  }
  return jobs;
}

void SqliteStateStore::save(std::string job_id, std::optional<std::string> state,
                            std::function<void(Status)> done) {
  {
    std::lock_guard lock(queue_mutex_);
    queue_.push_back(Pending{std::move(job_id), std::move(state), std::move(done),
                             boost::asio::make_work_guard(io_)});
  }
  queue_cv_.notify_one();
}

void SqliteStateStore::writer_loop() {
  for (;;) {
    std::vector<Pending> batch;
    {
      std::unique_lock lock(queue_mutex_);
      queue_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and every save was written
      while (!queue_.empty() && batch.size() < max_batch_) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    const Status result = commit(batch);
    // One post for the whole batch keeps the completions in save order.
    boost::asio::post(io_, [batch = std::move(batch), result]() mutable {
      for (auto& save : batch) save.done(result);
    });
  }
}

void SqliteStateStore::roll_back() {
  if (Status s = db_.exec("ROLLBACK;"); !s) {
    spdlog::warn("rendezvous state: rolling back a failed save: {}", s.message());
  }
}

Status SqliteStateStore::commit(const std::vector<Pending>& batch) {
  // Only the last save of each job in the batch reaches the disk: states are whole.
  std::unordered_map<std::string_view, const Pending*> last;
  for (const auto& save : batch) last[save.job_id] = &save;
  const int64_t now = wall_ms();
  std::lock_guard lock(db_mutex_);
  if (Status s = db_.exec("BEGIN IMMEDIATE;"); !s) return s.with_context("saving rendezvous state");
  for (const auto& save : batch) {
    if (last[save.job_id] != &save) continue;
    if (Status s = apply(save, now); !s) {
      roll_back();
      return s.with_context(fmt::format("saving the state of job '{}'", save.job_id));
    }
  }
  // With synchronous=FULL the WAL is fsynced before COMMIT returns.
  if (Status s = db_.exec("COMMIT;"); !s) {
    roll_back();
    return s.with_context("committing rendezvous state");
  }
  return Status();
}

Status SqliteStateStore::apply(const Pending& save, int64_t now_ms) {
  SqliteStatement& stmt = save.state ? upsert_ : erase_;
  stmt.reset();
  Status s = stmt.bind_text(1, save.job_id);
  if (s && save.state) s = stmt.bind_blob(2, *save.state);
  if (s && save.state) s = stmt.bind_int64(3, now_ms);
  if (!s) return s;
  auto done = stmt.step();
  stmt.reset();
  return done.status();
}

}  // namespace ddprun::rdzv::state
