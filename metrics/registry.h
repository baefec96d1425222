// A small metrics registry: counters, gauges and histograms with labels, grouped in families,
// rendered in the Prometheus text exposition format 0.0.4 (text_format.h), plus collectors that
// read values from elsewhere at scrape time (a store's statistics, /proc/self).
//
// Why our own: Debian bookworm packages no Prometheus client library for C++ (prometheus-cpp
// is not in bookworm), and ddprun takes its dependencies from Debian only. What ddprun needs
// is small: the types below, label sets, and the text format.
//
// Usage (on the owner's event loop):
//   Registry registry;
//   auto& starts = registry.counter("ddprun_agent_worker_starts_total", "Workers started.",
//                                   {"job_id"});
//   starts.with({"job-1"}).inc();
//   registry.add_collector([&](std::vector<FamilyData>& out) { ... });
//   std::string text = registry.render();  // the body of GET /metrics
//
// Conventions are the caller's (names with a unit suffix, `_total` for counters, base units);
// the registry checks what would make the output unparseable: metric and label names, label
// counts, histogram bounds, a name registered twice. Those are programming errors: they abort
// with a message naming the metric.
//
// Threading: none. A registry and its families are used from one thread, the owner's
// io_context thread (the agent's or the daemon's loop); scrapes run on that loop too, so no
// locks or atomics are needed and a value never changes during a scrape.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "metrics/text_format.h"

namespace ddprun::metrics {

// One label value per label name of the family, in the same order.
using LabelValues = std::vector<std::string>;

// A value that only goes up (restarts with the process).
class Counter {
 public:
  // Adds `by`; a negative `by` is ignored (a counter never goes down).
  void inc(double by = 1) {
    if (by > 0) value_ += by;
  }
  double value() const { return value_; }

 private:
  double value_ = 0;
};

// A value that goes up and down.
class Gauge {
 public:
  void set(double value) { value_ = value; }
  void inc(double by = 1) { value_ += by; }
  void dec(double by = 1) { value_ -= by; }
  double value() const { return value_; }

 private:
  double value_ = 0;
};

// Observations counted in buckets of upper bounds (the family's), with their sum.
class Histogram {
 public:
  explicit Histogram(std::shared_ptr<const std::vector<double>> bounds);
  void observe(double value);
  // Per bucket, not cumulative: counts()[i] observations fell in (bounds[i-1], bounds[i]];
  // the last entry counts those above every bound (the +Inf bucket).
  const std::vector<uint64_t>& counts() const { return counts_; }
  const std::vector<double>& bounds() const { return *bounds_; }
  double sum() const { return sum_; }
  uint64_t count() const { return count_; }

 private:
  std::shared_ptr<const std::vector<double>> bounds_;
  std::vector<uint64_t> counts_;
  double sum_ = 0;
  uint64_t count_ = 0;
};

// Bucket bounds start, start*factor, ... (`count` of them).
std::vector<double> exponential_buckets(double start, double factor, int count);

// How each kind of metric turns into samples (used by Family::snapshot).
MetricType type_of(const Counter*);
MetricType type_of(const Gauge*);
MetricType type_of(const Histogram*);
void append_samples(FamilyData& family, const Labels& labels, const Counter& counter);
void append_samples(FamilyData& family, const Labels& labels, const Gauge& gauge);
void append_samples(FamilyData& family, const Labels& labels, const Histogram& histogram);

class FamilyBase {
 public:
  virtual ~FamilyBase() = default;
  const std::string& name() const { return name_; }
  // The family's samples as they are now.
  virtual FamilyData snapshot() const = 0;

 protected:
  FamilyBase(std::string name, std::string help, std::vector<std::string> label_names)
      : name_(std::move(name)), help_(std::move(help)), label_names_(std::move(label_names)) {}
  Labels labels(const LabelValues& values) const;
  void check_arity(const LabelValues& values) const;  // aborts on a wrong number of values

  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
};

// Every series of one metric, one per distinct label set, printed in label-value order.
template <class Metric>
class Family final : public FamilyBase {
 public:
  // The series with these label values, created (at zero) on first use. The reference stays
  // valid until remove() of the same values or the registry's end.
  Metric& with(const LabelValues& values) {
    auto it = series_.find(values);
    if (it != series_.end()) return *it->second;
    check_arity(values);
    return *series_.emplace(values, make()).first->second;
  }
  // The single series of a family without labels.
  Metric& get() { return with({}); }
  // Forgets a series (e.g. a job that ended); it disappears from the next scrape.
  void remove(const LabelValues& values) { series_.erase(values); }
  FamilyData snapshot() const override {
    FamilyData data{name_, help_, type_of(static_cast<const Metric*>(nullptr)), {}};
    for (const auto& [values, metric] : series_) append_samples(data, labels(values), *metric);
    return data;
  }

 private:
  friend class Registry;
  Family(std::string name, std::string help, std::vector<std::string> label_names,
         std::shared_ptr<const std::vector<double>> bounds = nullptr)
      : FamilyBase(std::move(name), std::move(help), std::move(label_names)),
        bounds_(std::move(bounds)) {}
  std::unique_ptr<Metric> make() const {
    if constexpr (std::is_same_v<Metric, Histogram>) {
      return std::make_unique<Histogram>(bounds_);
    } else {
      return std::make_unique<Metric>();
    }
  }

  std::shared_ptr<const std::vector<double>> bounds_;  // histograms only
  std::map<LabelValues, std::unique_ptr<Metric>> series_;
};

class Registry {
 public:
  // Adds values from elsewhere to every scrape: appends whole families to `out`.
  using Collector = std::function<void(std::vector<FamilyData>& out)>;

  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // New families. The returned references live as long as the registry.
  Family<Counter>& counter(std::string name, std::string help,
                           std::vector<std::string> label_names = {});
  Family<Gauge>& gauge(std::string name, std::string help,
                       std::vector<std::string> label_names = {});
  // `bounds`: strictly increasing finite upper bounds (+Inf is implied).
  Family<Histogram>& histogram(std::string name, std::string help,
                               std::vector<std::string> label_names, std::vector<double> bounds);

  void add_collector(Collector collector);

  // Every family (registered ones in registration order, then the collectors'), as of now.
  std::vector<FamilyData> collect() const;
  // collect() in the text exposition format.
  std::string render() const;

 private:
  template <class F>
  F& add(std::unique_ptr<F> family);

  std::vector<std::unique_ptr<FamilyBase>> families_;
  std::vector<Collector> collectors_;
};

}  // namespace ddprun::metrics
