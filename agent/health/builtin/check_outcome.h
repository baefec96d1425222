// What one kind of built-in node check found, and the small JSON file the check's child writes
// for the agent (its metrics count outcomes per kind).
#pragma once

#include <string>
#include <vector>

#include "common/result.h"

namespace ddprun::agent::builtin {

struct CheckOutcome {
  std::string check;  // "gpu", "nic" or "path"
  // One line per problem, naming the device, interface or path and the value seen
  // ("GPU 2: 3 uncorrectable ECC errors"). Empty: the check passed.
  std::vector<std::string> problems;

  bool passed() const { return problems.empty(); }
};

// {"checks":[{"check":"gpu","problems":["..."]},...]}
std::string outcomes_to_json(const std::vector<CheckOutcome>& outcomes);
// The inverse; an error names what is wrong with `text`.
Result<std::vector<CheckOutcome>> outcomes_from_json(const std::string& text);

}  // namespace ddprun::agent::builtin
