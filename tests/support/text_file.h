// The whole of a file as bytes, for tests that check what a program wrote.
#pragma once

#include <string>

namespace ddprun::testing {

// The whole file, or "" when it cannot be read.
std::string read_text_file(const std::string& path);

}  // namespace ddprun::testing
