// The ddprun worker SDK: data-parallel training in C++ under ddprun or torchrun.
// Include this one header. Guide: docs/worker_sdk.md.
//
//   int main() {
//     return ddp::record([] {                               // failures reach the launcher
//       auto group = ddp::init_process_group();            // RANK, WORLD_SIZE, MASTER_*...
//       ddp::DistributedDataParallel model(Net(), group);  // broadcasts rank 0's weights
//       loss_fn(model(x), y).backward();                   // gradients averaged across ranks
//       ddp::destroy_process_group();                      // every rank done: safe to exit
//     });
//   }
#pragma once

// The one header a training program needs: LibTorch itself comes with it.
#include <torch/torch.h>

#include "ddp/comm_hooks.h"
#include "ddp/ddp_options.h"
#include "ddp/distributed_data_parallel.h"
#include "ddp/error.h"
#include "ddp/exclude_node.h"
#include "ddp/failure.h"
#include "ddp/heartbeat.h"
#include "ddp/launch_env.h"
#include "ddp/object_collectives.h"
#include "ddp/process_group.h"
#include "ddp/sampling.h"
#include "ddp/snapshot.h"
#include "ddp/stop_job.h"
#include "ddp/sync_batch_norm.h"
