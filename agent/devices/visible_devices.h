// The rules by which accelerator runtimes narrow the devices a process sees from a visibility
// variable (CUDA_VISIBLE_DEVICES and its ROCm kin, Level Zero's ZE_AFFINITY_MASK). Pure: strings
// in, devices out, no I/O, no environment; docs/devices.md states the rules for users.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ddprun::agent::devices {

// One device a visibility list may name: by its position among the candidates, or by its UUID
// ("GPU-…" as nvidia-smi and rocminfo print it; empty when the device tree does not say).
struct ListedDevice {
  std::string uuid;
  bool operator==(const ListedDevice&) const = default;
};

// The devices of `candidates` that a list in CUDA's syntax leaves visible, in the list's order.
// CUDA's rule, which HIP and ROCr share (and torch.cuda.device_count follows):
//   * entries are separated by commas, blanks around an entry do not count;
//   * indices: an entry is read like strtoul (its leading digits: "1gpu" is 1); an entry with no
//     leading digits, a negative one ("-1"), or an index past the last candidate ends the list
//     there, so "" and "-1" hide every device; the same index twice hides every device;
//   * UUIDs: when the first entry starts with "GPU-" or "MIG-", entries are UUID prefixes; the
//     first entry without that prefix, matching no candidate, or matching two ends the list; the
//     same device twice hides every device. Where no candidate's UUID is known (the tree did
//     not say), and for MIG instances, which the device tree does not list, each entry counts
//     as one device, up to the number of candidates (MIG: without that bound).
std::vector<ListedDevice> cuda_visible(std::string_view list,
                                       const std::vector<ListedDevice>& candidates);

// How Level Zero presents a card with several tiles (ZE_FLAT_DEVICE_HIERARCHY).
enum class ZeHierarchy {
  kFlat,       // FLAT (the default) and COMBINED: every tile is a device of its own
  kComposite,  // COMPOSITE: a card is one device, its tiles are sub-devices
};

// ZE_FLAT_DEVICE_HIERARCHY's value ("FLAT", "COMPOSITE", "COMBINED"; unset or unknown: FLAT).
ZeHierarchy parse_ze_hierarchy(std::string_view value);

// How many devices Level Zero shows with ZE_AFFINITY_MASK = `mask` on cards whose tile counts
// are `tiles_per_card` (index = card in the driver's order; a card without tiles counts 1).
// FLAT: entries are device indices among every card's tiles ("0,3"); an entry "D.S" names
// nothing. COMPOSITE: an entry is a card ("1") or one tile of a card ("0.1"); entries naming the
// same card make one device. Level Zero ignores entries that name no device or tile (it does
// not stop at them as CUDA does); an empty mask is no mask.
int level_zero_visible(std::string_view mask, const std::vector<int>& tiles_per_card,
                       ZeHierarchy hierarchy);

// The `index`-th entry of a comma-separated visibility list, without surrounding blanks; empty
// when the list has fewer entries. What a worker of local rank `index` gets under
// --virtual-local-rank, as torchrun hands it out.
std::string list_entry(std::string_view list, int index);

}  // namespace ddprun::agent::devices
