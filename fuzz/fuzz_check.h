// What every fuzz target shares: a property check that aborts (so libFuzzer keeps the input as a
// crash), and byte-span helpers.
//
// Each target asserts the properties its parser promises in its header: decoding never crashes
// or throws, every refusal is a clean error of the documented kind, and where there is an
// encoder, what decodes re-encodes to the same bytes (or to a value that decodes the same).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>

// Aborts with the failed property and where, when `cond` is false. Not assert(): it must hold
// in every build type.
#define FUZZ_CHECK(cond)                                                                     \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "fuzz property failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)

namespace ddprun::fuzz {

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

inline std::span<const uint8_t> as_bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

inline bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

}  // namespace ddprun::fuzz
