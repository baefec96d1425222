#include "common/service_notifier.h"

namespace ddprun {

std::string ServiceNotifier::status_message(std::string_view line) {
  std::string out = "STATUS=";
  for (char c : line.substr(0, kMaxStatusBytes)) {
    // A newline would start another assignment: the protocol's message is line-based.
    out += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? ' ' : c;
  }
  return out;
}

std::string ServiceNotifier::ready_message(std::string_view status_line) {
  if (status_line.empty()) return "READY=1";
  return "READY=1\n" + status_message(status_line);
}

}  // namespace ddprun
