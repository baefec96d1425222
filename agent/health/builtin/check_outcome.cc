#include "agent/health/builtin/check_outcome.h"

#include <nlohmann/json.hpp>

namespace ddprun::agent::builtin {

std::string outcomes_to_json(const std::vector<CheckOutcome>& outcomes) {
  nlohmann::json checks = nlohmann::json::array();
  for (const CheckOutcome& outcome : outcomes) {
    checks.push_back({{"check", outcome.check}, {"problems", outcome.problems}});
  }
  return nlohmann::json{{"checks", checks}}.dump();
}

Result<std::vector<CheckOutcome>> outcomes_from_json(const std::string& text) {
  const nlohmann::json parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object() || !parsed.contains("checks") || !parsed["checks"].is_array()) {
    return Status::malformed("the node check's result is not {\"checks\": [...]}");
  }
  std::vector<CheckOutcome> outcomes;
  for (const nlohmann::json& entry : parsed["checks"]) {
    if (!entry.is_object() || !entry.contains("check") || !entry["check"].is_string() ||
        !entry.contains("problems") || !entry["problems"].is_array()) {
      return Status::malformed("the node check's result has an entry without check and problems");
    }
    CheckOutcome outcome;
    outcome.check = entry["check"].get<std::string>();
    for (const nlohmann::json& problem : entry["problems"]) {
      if (!problem.is_string()) return Status::malformed("a problem that is not a string");
      outcome.problems.push_back(problem.get<std::string>());
    }
    outcomes.push_back(std::move(outcome));
  }
  return outcomes;
}

}  // namespace ddprun::agent::builtin
