#include "ddp/distributed_data_parallel.h"

#include "reducer.h"

namespace ddp {

NoSyncGuard::NoSyncGuard(DistributedDataParallelBase& ddp) : ddp_(&ddp), previous_(ddp.sync()) {
  ddp_->set_sync(false);
}

NoSyncGuard::~NoSyncGuard() {
  if (ddp_ != nullptr) ddp_->set_sync(previous_);
}

DistributedDataParallelBase::DistributedDataParallelBase(
    std::shared_ptr<ProcessGroup> group, std::vector<std::pair<std::string, at::Tensor>> params,
    std::vector<at::Tensor> buffers, DdpOptions options)
    : reducer_(detail::Reducer::create(std::move(group), std::move(params), std::move(buffers),
                                       std::move(options))) {}

DistributedDataParallelBase::~DistributedDataParallelBase() = default;

void DistributedDataParallelBase::before_forward(bool training) {
  reducer_->before_forward(training);
}
bool DistributedDataParallelBase::sync() const { return reducer_->sync(); }
void DistributedDataParallelBase::set_sync(bool sync) { reducer_->set_sync(sync); }
void DistributedDataParallelBase::begin_join() { reducer_->begin_join(); }
void DistributedDataParallelBase::finish_join() { reducer_->finish_join(); }
void DistributedDataParallelBase::abandon_join() noexcept { reducer_->abandon_join(); }
void DistributedDataParallelBase::set_step_offset(std::int64_t steps) {
  reducer_->set_step_offset(steps);
}
ProcessGroup& DistributedDataParallelBase::group() { return reducer_->group(); }
DdpStats DistributedDataParallelBase::stats() const { return reducer_->stats(); }
std::vector<std::vector<std::string>> DistributedDataParallelBase::bucket_parameter_names() const {
  return reducer_->bucket_parameter_names();
}

}  // namespace ddp
