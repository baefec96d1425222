#include "metrics/text_format.h"

#include <cmath>

#include <fmt/format.h>

namespace ddprun::metrics {
namespace {

bool is_alpha_or_underscore(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }

void append_sample(std::string& out, const Sample& s) {
  out += s.name;
  if (!s.labels.empty()) {
    out += '{';
    bool first = true;
    for (const auto& [name, value] : s.labels) {
      if (!first) out += ',';
      first = false;
      out += name;
      out += "=\"";
      out += escape_label_value(value);
      out += '"';
    }
    out += '}';
  }
  out += ' ';
  out += format_value(s.value);
  out += '\n';
}

}  // namespace

const char* to_string(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

std::string escape_help(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string format_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // fmt's shortest round-trip form ("3", "0.005", "1e+21"), which Prometheus' parser (Go's
  // strconv.ParseFloat) reads back exactly.
  return fmt::format("{}", value);
}

bool valid_metric_name(std::string_view name) {
  if (name.empty() || !(is_alpha_or_underscore(name[0]) || name[0] == ':')) return false;
  for (char c : name) {
    if (!is_alpha_or_underscore(c) && !is_digit(c) && c != ':') return false;
  }
  return true;
}

bool valid_label_name(std::string_view name) {
  if (name.empty() || !is_alpha_or_underscore(name[0]) || name.substr(0, 2) == "__") return false;
  for (char c : name) {
    if (!is_alpha_or_underscore(c) && !is_digit(c)) return false;
  }
  return true;
}

std::string render_text(const std::vector<FamilyData>& families) {
  std::string out;
  for (const FamilyData& family : families) {
    out += "# HELP ";
    out += family.name;
    out += ' ';
    out += escape_help(family.help);
    out += "\n# TYPE ";
    out += family.name;
    out += ' ';
    out += to_string(family.type);
    out += '\n';
    for (const Sample& sample : family.samples) append_sample(out, sample);
  }
  return out;
}

}  // namespace ddprun::metrics
