// A minimal user program of the installed SDK (C++17, only public headers): init, one
// all-reduce, destroy. Prints "consumer: sum <s> on <n> ranks" on rank 0.
#include <ATen/ops/full.h>

#include <iostream>

#include <ddp/failure.h>
#include <ddp/process_group.h>

int main() {
  return ddp::record([] {
    auto group = ddp::init_process_group();
    auto t = at::full({3}, group->rank() + 1.0);
    group->all_reduce(t);
    group->print_primary("consumer: sum ", t[0].item<double>(), " on ", group->size(), " ranks");
    ddp::destroy_process_group();
    return 0;
  });
}
