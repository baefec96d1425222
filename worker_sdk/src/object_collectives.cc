#include "ddp/object_collectives.h"

#include <torch/serialize.h>

#include "ddp/error.h"

namespace ddp {
namespace {

std::string pickle(const ProcessGroup& group, const char* op, const c10::IValue& object) {
  try {
    auto bytes = torch::pickle_save(object);
    return std::string(bytes.begin(), bytes.end());
  } catch (const c10::Error& e) {
    throw Error(group.global_rank(), op,
                std::string("cannot pickle the object: ") + e.what_without_backtrace());
  }
}

c10::IValue unpickle(const ProcessGroup& group, const char* op, const std::string& bytes,
                     int from) {
  try {
    return torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
  } catch (const c10::Error& e) {
    throw Error(group.global_rank(), op,
                "cannot unpickle rank " + std::to_string(from) +
                    "'s object: " + e.what_without_backtrace());
  }
}

}  // namespace

c10::IValue broadcast_object(ProcessGroup& group, const c10::IValue& object, int root) {
  const char* op = "broadcast_object";
  const std::string mine = group.rank() == root ? pickle(group, op, object) : std::string();
  return unpickle(group, op, group.broadcast_bytes(mine, root), root);
}

std::vector<c10::IValue> all_gather_object(ProcessGroup& group, const c10::IValue& object) {
  const char* op = "all_gather_object";
  const auto all = group.all_gather_bytes(pickle(group, op, object));
  std::vector<c10::IValue> out;
  for (std::size_t r = 0; r < all.size(); ++r) {
    out.push_back(unpickle(group, op, all[r], static_cast<int>(r)));
  }
  return out;
}

std::vector<c10::IValue> gather_object(ProcessGroup& group, const c10::IValue& object, int root) {
  const char* op = "gather_object";
  const auto all = group.gather_bytes(pickle(group, op, object), root);
  std::vector<c10::IValue> out;
  for (std::size_t r = 0; r < all.size(); ++r) {
    out.push_back(unpickle(group, op, all[r], static_cast<int>(r)));
  }
  return out;
}

}  // namespace ddp
