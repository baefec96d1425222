// The runtimes' visibility rules on strings (agent/devices/visible_devices.h): CUDA's, which HIP
// and ROCr share, and Level Zero's ZE_AFFINITY_MASK under both hierarchies.
#include "agent/devices/visible_devices.h"

#include <gtest/gtest.h>

namespace ddprun::agent::devices {
namespace {

std::vector<ListedDevice> anonymous(int n) { return std::vector<ListedDevice>(n); }

int count(std::string_view list, const std::vector<ListedDevice>& candidates) {
  return static_cast<int>(cuda_visible(list, candidates).size());
}

const std::vector<ListedDevice> kFour{
    {"GPU-aaaa1111"}, {"GPU-aaaa2222"}, {"GPU-bbbb"}, {"GPU-cccc"}};

TEST(CudaVisible, IndicesPickDevicesInTheListsOrder) {
  EXPECT_EQ(cuda_visible("3,1", kFour), (std::vector<ListedDevice>{kFour[3], kFour[1]}));
  EXPECT_EQ(count(" 2 , 0 ", kFour), 2);       // blanks around entries do not count
  EXPECT_EQ(count("1gpu,2ampere", kFour), 2);  // read like strtoul: the leading digits
  EXPECT_EQ(count("+1", kFour), 1);
}

TEST(CudaVisible, EmptyOrMinusOneHidesEveryDevice) {
  EXPECT_EQ(count("", kFour), 0);
  EXPECT_EQ(count("-1", kFour), 0);
  EXPECT_EQ(count(",0", kFour), 0);
}

TEST(CudaVisible, AnInvalidEntryEndsTheList) {
  EXPECT_EQ(count("0,1,-1,2", kFour), 2);
  EXPECT_EQ(count("0,x,2", kFour), 1);
  EXPECT_EQ(count("0,,2", kFour), 1);
  EXPECT_EQ(count("1,9,2", kFour), 1);  // an index past the last device ends it as well
  EXPECT_EQ(count("99999999999999999999999,0", kFour), 0);
}

TEST(CudaVisible, ARepeatedDeviceHidesEveryDevice) {
  EXPECT_EQ(count("0,1,0", kFour), 0);
  EXPECT_EQ(count("GPU-bbbb,GPU-bbbb", kFour), 0);
  EXPECT_EQ(count("GPU-bbbb,GPU-bb", kFour), 0);  // two prefixes of one device
}

TEST(CudaVisible, UuidPrefixesNameDevices) {
  EXPECT_EQ(cuda_visible("GPU-cccc,GPU-aaaa2", kFour),
            (std::vector<ListedDevice>{kFour[3], kFour[1]}));
  EXPECT_EQ(count("GPU-aaaa", kFour), 0);                    // matches two devices: ambiguous
  EXPECT_EQ(count("GPU-bbbb,GPU-aaaa,GPU-cccc", kFour), 1);  // the ambiguous one ends the list
  EXPECT_EQ(count("GPU-bbbb,GPU-dddd,GPU-cccc", kFour), 1);  // so does an unknown one
  EXPECT_EQ(count("GPU-bbbb,2", kFour), 1);                  // and one that is not a UUID
}

TEST(CudaVisible, UuidsTheTreeDoesNotKnowCountAsListedUpToTheDevices) {
  EXPECT_EQ(count("GPU-1,GPU-2", anonymous(4)), 2);
  EXPECT_EQ(count("GPU-1,GPU-2,GPU-3", anonymous(2)), 2);
  // MIG instances are not in the device tree: each listed one is a device.
  EXPECT_EQ(count("MIG-a,MIG-b,MIG-c", kFour), 3);
  EXPECT_EQ(count("MIG-a,GPU-bbbb", kFour), 1);
}

TEST(CudaVisible, ANarrowedListIndexesWhatIsLeft) {
  // ROCm's two stages: HIP's list over ROCR's survivors.
  const auto left = cuda_visible("2,3", kFour);
  EXPECT_EQ(cuda_visible("1", left), (std::vector<ListedDevice>{kFour[3]}));
  EXPECT_EQ(count("0,1,2", left), 2);
}

TEST(LevelZeroVisible, FlatHierarchyCountsEveryTile) {
  const std::vector<int> two_cards_two_tiles{2, 2};
  EXPECT_EQ(level_zero_visible("", two_cards_two_tiles, ZeHierarchy::kFlat), 4);
  EXPECT_EQ(level_zero_visible("0,3", two_cards_two_tiles, ZeHierarchy::kFlat), 2);
  EXPECT_EQ(level_zero_visible("3,0,3", two_cards_two_tiles, ZeHierarchy::kFlat), 2);
  // Entries naming no device are ignored, not an end: unlike CUDA.
  EXPECT_EQ(level_zero_visible("9,1,x,-1,2", two_cards_two_tiles, ZeHierarchy::kFlat), 2);
  EXPECT_EQ(level_zero_visible("0.1", two_cards_two_tiles, ZeHierarchy::kFlat), 0);
  EXPECT_EQ(level_zero_visible("7", two_cards_two_tiles, ZeHierarchy::kFlat), 0);
  EXPECT_EQ(level_zero_visible("", {0, 1, 3}, ZeHierarchy::kFlat), 5);  // no tiles: one device
}

TEST(LevelZeroVisible, CompositeHierarchyCountsCardsAndTheirTiles) {
  const std::vector<int> cards{2, 2, 1};
  EXPECT_EQ(level_zero_visible("", cards, ZeHierarchy::kComposite), 3);
  EXPECT_EQ(level_zero_visible("0.1,2", cards, ZeHierarchy::kComposite), 2);
  EXPECT_EQ(level_zero_visible("0.0,0.1", cards, ZeHierarchy::kComposite), 1);  // one card
  EXPECT_EQ(level_zero_visible("0.2,1.x,3,1", cards, ZeHierarchy::kComposite), 1);
  EXPECT_EQ(level_zero_visible("2.0", cards, ZeHierarchy::kComposite), 1);
}

TEST(LevelZeroVisible, HierarchyNames) {
  EXPECT_EQ(parse_ze_hierarchy("COMPOSITE"), ZeHierarchy::kComposite);
  EXPECT_EQ(parse_ze_hierarchy("FLAT"), ZeHierarchy::kFlat);
  EXPECT_EQ(parse_ze_hierarchy("COMBINED"), ZeHierarchy::kFlat);
  EXPECT_EQ(parse_ze_hierarchy(""), ZeHierarchy::kFlat);
}

TEST(ListEntry, TheIndexthEntryWithoutBlanks) {
  EXPECT_EQ(list_entry("4, 5 ,6", 1), "5");
  EXPECT_EQ(list_entry("GPU-a,GPU-b", 0), "GPU-a");
  EXPECT_EQ(list_entry("4,5", 2), "");
  EXPECT_EQ(list_entry("", 0), "");
}

}  // namespace
}  // namespace ddprun::agent::devices
