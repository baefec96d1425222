// The Prometheus text exposition format, version 0.0.4: what a scrape of /metrics returns.
//
//   # HELP <name> <help, with \ and newline escaped>
//   # TYPE <name> counter|gauge|histogram
//   <name>{<label>="<value, with \ " and newline escaped>",...} <value>
//
// A histogram family `h` renders `h_bucket{...,le="<bound>"}` per bucket (cumulative counts,
// the last bucket le="+Inf"), then `h_sum` and `h_count`. Values print as the shortest text
// that reads back as the same double; +Inf, -Inf and NaN as Prometheus spells them.
//
// Pure: values in, text out. The registry (registry.h) produces the FamilyData.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ddprun::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };
const char* to_string(MetricType type);  // "counter", "gauge", "histogram"

// Label names and values in the order they are printed.
using Labels = std::vector<std::pair<std::string, std::string>>;

// One line of the exposition.
struct Sample {
  std::string name;  // the family's name, or with _bucket/_sum/_count for histograms
  Labels labels;
  double value = 0;
};

// One metric family: its HELP and TYPE lines and its samples, in order.
struct FamilyData {
  std::string name;
  std::string help;
  MetricType type = MetricType::kGauge;
  std::vector<Sample> samples;

  // Appends a sample named after the family (counters and gauges).
  void add(Labels labels, double value) { samples.push_back({name, std::move(labels), value}); }
};

// The whole exposition of `families`, in order. Families without samples still print their
// HELP and TYPE lines.
std::string render_text(const std::vector<FamilyData>& families);

// The pieces, exposed for tests.
std::string escape_help(std::string_view help);
std::string escape_label_value(std::string_view value);
std::string format_value(double value);

// Metric names: [a-zA-Z_:][a-zA-Z0-9_:]*; label names: [a-zA-Z_][a-zA-Z0-9_]*, not starting
// with "__" (reserved for Prometheus itself).
bool valid_metric_name(std::string_view name);
bool valid_label_name(std::string_view name);

}  // namespace ddprun::metrics
