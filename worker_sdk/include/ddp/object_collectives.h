// Collectives on objects: torch.distributed's broadcast_object_list / all_gather_object /
// gather_object in C++. Any c10::IValue travels (tensors, strings, numbers, lists, dicts,
// tuples), pickled with torch::pickle_save, so Python's torch.load reads the same bytes.
//
//   c10::IValue config = group->is_primary() ? c10::IValue(read_config()) : c10::IValue();
//   config = ddp::broadcast_object(*group, config);        // rank 0's config everywhere
//   auto losses = ddp::all_gather_object(*group, c10::IValue(loss.item<double>()));
//
// Each is two collectives (sizes, then bytes; see ProcessGroup::*_bytes) with the error
// model of ProcessGroup. Tensors inside objects must be CPU tensors.
#pragma once

#include <vector>

#include <ATen/core/ivalue.h>

#include "ddp/export.h"
#include "ddp/process_group.h"

namespace ddp {

// Returns root's object on every rank (other ranks' argument is ignored).
DDP_API c10::IValue broadcast_object(ProcessGroup& group, const c10::IValue& object, int root = 0);
// Every rank's object, in rank order.
DDP_API std::vector<c10::IValue> all_gather_object(ProcessGroup& group, const c10::IValue& object);
// Every rank's object on root, in rank order; other ranks get an empty vector.
DDP_API std::vector<c10::IValue> gather_object(ProcessGroup& group, const c10::IValue& object,
                                               int root = 0);

}  // namespace ddp
