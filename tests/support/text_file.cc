#include "tests/support/text_file.h"

#include <fstream>
#include <sstream>

namespace ddprun::testing {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace ddprun::testing
