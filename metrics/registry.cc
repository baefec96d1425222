#include "metrics/registry.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ddprun::metrics {
namespace {

// A broken invariant of the caller's code: say which metric, then abort (see registry.h).
[[noreturn]] void misuse(const std::string& metric, const std::string& what) {
  (void)std::fprintf(stderr, "metrics: %s: %s\n", metric.c_str(), what.c_str());
  (void)std::fflush(stderr);
  std::abort();
}

void check_names(const std::string& name, const std::vector<std::string>& label_names) {
  if (!valid_metric_name(name)) misuse(name, "not a valid metric name");
  for (const std::string& label : label_names) {
    if (!valid_label_name(label)) misuse(name, "'" + label + "' is not a valid label name");
  }
}

}  // namespace

MetricType type_of(const Counter*) { return MetricType::kCounter; }
MetricType type_of(const Gauge*) { return MetricType::kGauge; }
MetricType type_of(const Histogram*) { return MetricType::kHistogram; }

void append_samples(FamilyData& family, const Labels& labels, const Counter& counter) {
  family.add(labels, counter.value());
}

void append_samples(FamilyData& family, const Labels& labels, const Gauge& gauge) {
  family.add(labels, gauge.value());
}

void append_samples(FamilyData& family, const Labels& labels, const Histogram& histogram) {
  uint64_t cumulative = 0;
  const auto& bounds = histogram.bounds();
  for (size_t i = 0; i <= bounds.size(); ++i) {
    cumulative += histogram.counts()[i];
    Labels with_le = labels;
    with_le.emplace_back("le", i < bounds.size() ? format_value(bounds[i]) : "+Inf");
    family.samples.push_back(
        {family.name + "_bucket", std::move(with_le), static_cast<double>(cumulative)});
  }
  family.samples.push_back({family.name + "_sum", labels, histogram.sum()});
  family.samples.push_back(
      {family.name + "_count", labels, static_cast<double>(histogram.count())});
}

Histogram::Histogram(std::shared_ptr<const std::vector<double>> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_->size() + 1, 0) {}

void Histogram::observe(double value) {
  // The first bound >= value: buckets are "less than or equal" (le).
  const auto it = std::lower_bound(bounds_->begin(), bounds_->end(), value);
  ++counts_[static_cast<size_t>(it - bounds_->begin())];
  sum_ += value;
  ++count_;
}

std::vector<double> exponential_buckets(double start, double factor, int count) {
  std::vector<double> bounds;
  double bound = start;
  for (int i = 0; i < count; ++i, bound *= factor) bounds.push_back(bound);
  return bounds;
}

Labels FamilyBase::labels(const LabelValues& values) const {
  Labels out;
  out.reserve(values.size());
  for (size_t i = 0; i < values.size(); ++i) out.emplace_back(label_names_[i], values[i]);
  return out;
}

void FamilyBase::check_arity(const LabelValues& values) const {
  if (values.size() != label_names_.size()) {
    misuse(name_, "given " + std::to_string(values.size()) + " label values for " +
                      std::to_string(label_names_.size()) + " labels");
  }
}

template <class F>
F& Registry::add(std::unique_ptr<F> family) {
  for (const auto& existing : families_) {
    if (existing->name() == family->name()) misuse(family->name(), "registered twice");
  }
  F& ref = *family;
  families_.push_back(std::move(family));
  return ref;
}

Family<Counter>& Registry::counter(std::string name, std::string help,
                                   std::vector<std::string> label_names) {
  check_names(name, label_names);
  return add(std::unique_ptr<Family<Counter>>(
      new Family<Counter>(std::move(name), std::move(help), std::move(label_names))));
}

Family<Gauge>& Registry::gauge(std::string name, std::string help,
                               std::vector<std::string> label_names) {
  check_names(name, label_names);
  return add(std::unique_ptr<Family<Gauge>>(
      new Family<Gauge>(std::move(name), std::move(help), std::move(label_names))));
}

Family<Histogram>& Registry::histogram(std::string name, std::string help,
                                       std::vector<std::string> label_names,
                                       std::vector<double> bounds) {
  check_names(name, label_names);
  if (std::find(label_names.begin(), label_names.end(), "le") != label_names.end()) {
    misuse(name, "a histogram cannot have a label named 'le'");
  }
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i]) || (i > 0 && bounds[i] <= bounds[i - 1])) {
      misuse(name, "bucket bounds must be finite and strictly increasing");
    }
  }
  auto shared = std::make_shared<const std::vector<double>>(std::move(bounds));
  return add(std::unique_ptr<Family<Histogram>>(new Family<Histogram>(
      std::move(name), std::move(help), std::move(label_names), std::move(shared))));
}

void Registry::add_collector(Collector collector) { collectors_.push_back(std::move(collector)); }

std::vector<FamilyData> Registry::collect() const {
  std::vector<FamilyData> out;
  out.reserve(families_.size());
  for (const auto& family : families_) out.push_back(family->snapshot());
  for (const Collector& collector : collectors_) collector(out);
  return out;
}

std::string Registry::render() const { return render_text(collect()); }

}  // namespace ddprun::metrics
