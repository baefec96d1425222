// The registry and the text exposition format: exact output for each metric type, escaping,
// number formatting, collectors, and the checks that keep the output parseable.
#include "metrics/registry.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "metrics/text_format.h"

namespace ddprun::metrics {
namespace {

TEST(TextFormat, CounterAndGaugeWithHelpTypeAndLabels) {
  Registry registry;
  auto& starts = registry.counter("x_starts_total", "Workers started.", {"job_id"});
  auto& size = registry.gauge("x_world_size", "Workers in the round.");
  starts.with({"b"}).inc();
  starts.with({"a"}).inc(2.5);
  size.get().set(8);
  EXPECT_EQ(registry.render(),
            "# HELP x_starts_total Workers started.\n"
            "# TYPE x_starts_total counter\n"
            "x_starts_total{job_id=\"a\"} 2.5\n"
            "x_starts_total{job_id=\"b\"} 1\n"
            "# HELP x_world_size Workers in the round.\n"
            "# TYPE x_world_size gauge\n"
            "x_world_size 8\n");
}

TEST(TextFormat, FamilyWithoutSamplesStillHasHelpAndType) {
  Registry registry;
  registry.counter("x_exits_total", "Exits.", {"reason"});
  EXPECT_EQ(registry.render(), "# HELP x_exits_total Exits.\n# TYPE x_exits_total counter\n");
}

TEST(TextFormat, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  Registry registry;
  auto& h = registry.histogram("x_wait_seconds", "Waits.", {"job_id"}, {0.1, 1, 10});
  auto& series = h.with({"j"});
  for (double v : {0.05, 0.1, 0.5, 20.0}) series.observe(v);
  EXPECT_EQ(registry.render(),
            "# HELP x_wait_seconds Waits.\n"
            "# TYPE x_wait_seconds histogram\n"
            "x_wait_seconds_bucket{job_id=\"j\",le=\"0.1\"} 2\n"
            "x_wait_seconds_bucket{job_id=\"j\",le=\"1\"} 3\n"
            "x_wait_seconds_bucket{job_id=\"j\",le=\"10\"} 3\n"
            "x_wait_seconds_bucket{job_id=\"j\",le=\"+Inf\"} 4\n"
            "x_wait_seconds_sum{job_id=\"j\"} 20.65\n"
            "x_wait_seconds_count{job_id=\"j\"} 4\n");
}

TEST(TextFormat, EscapesLabelValuesAndHelp) {
  EXPECT_EQ(escape_label_value("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  EXPECT_EQ(escape_help("two\nlines \\ \"quoted\""), "two\\nlines \\\\ \"quoted\"");
  Registry registry;
  registry.gauge("x_g", "Help with\nnewline.", {"path"}).with({"C:\\dir \"x\""}).set(1);
  EXPECT_EQ(registry.render(),
            "# HELP x_g Help with\\nnewline.\n"
            "# TYPE x_g gauge\n"
            "x_g{path=\"C:\\\\dir \\\"x\\\"\"} 1\n");
}

TEST(TextFormat, FormatsValuesAsPrometheusReadsThem) {
  EXPECT_EQ(format_value(0), "0");
  EXPECT_EQ(format_value(3), "3");
  EXPECT_EQ(format_value(-2), "-2");
  EXPECT_EQ(format_value(0.005), "0.005");
  EXPECT_EQ(format_value(123456789), "123456789");
  EXPECT_EQ(format_value(1e21), "1e+21");
  EXPECT_EQ(format_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(format_value(std::nan("")), "NaN");
}

TEST(TextFormat, ValidatesNames) {
  EXPECT_TRUE(valid_metric_name("ddprun_x_total"));
  EXPECT_TRUE(valid_metric_name("a:b_c9"));
  EXPECT_FALSE(valid_metric_name(""));
  EXPECT_FALSE(valid_metric_name("9x"));
  EXPECT_FALSE(valid_metric_name("x-y"));
  EXPECT_TRUE(valid_label_name("job_id"));
  EXPECT_FALSE(valid_label_name("__name__"));
  EXPECT_FALSE(valid_label_name("a:b"));
  EXPECT_FALSE(valid_label_name("1a"));
}

TEST(Registry, CountersNeverGoDownAndGaugesDo) {
  Registry registry;
  Counter& c = registry.counter("x_total", "c").get();
  c.inc(3);
  c.inc(-1);
  EXPECT_EQ(c.value(), 3);
  Gauge& g = registry.gauge("x_g", "g").get();
  g.inc(5);
  g.dec(2);
  EXPECT_EQ(g.value(), 3);
}

TEST(Registry, SeriesKeepTheirIdentityAndCanBeRemoved) {
  Registry registry;
  auto& family = registry.gauge("x_nodes", "n", {"job_id", "state"});
  Gauge& a = family.with({"j", "member"});
  a.set(2);
  EXPECT_EQ(&family.with({"j", "member"}), &a);
  family.with({"j", "standby"}).set(1);
  family.remove({"j", "member"});
  EXPECT_EQ(registry.render(),
            "# HELP x_nodes n\n# TYPE x_nodes gauge\nx_nodes{job_id=\"j\",state=\"standby\"} 1\n");
}

TEST(Registry, CollectorsAddFamiliesAtScrapeTime) {
  Registry registry;
  registry.counter("x_a_total", "a").get().inc();
  double read_at_scrape = 1;
  registry.add_collector([&](std::vector<FamilyData>& out) {
    FamilyData f{"x_b", "b", MetricType::kGauge, {}};
    f.add({{"k", "v"}}, read_at_scrape);
    out.push_back(std::move(f));
  });
  read_at_scrape = 7;
  EXPECT_EQ(registry.render(),
            "# HELP x_a_total a\n# TYPE x_a_total counter\nx_a_total 1\n"
            "# HELP x_b b\n# TYPE x_b gauge\nx_b{k=\"v\"} 7\n");
}

TEST(Registry, ExponentialBuckets) {
  EXPECT_EQ(exponential_buckets(0.001, 10, 4), (std::vector<double>{0.001, 0.01, 0.1, 1}));
}

using RegistryDeathTest = ::testing::Test;

TEST(RegistryDeathTest, MisuseAbortsNamingTheMetric) {
  EXPECT_DEATH(
      {
        Registry r;
        r.counter("x_total", "a");
        r.counter("x_total", "b");
      },
      "x_total: registered twice");
  EXPECT_DEATH(
      {
        Registry r;
        r.gauge("x_g", "g", {"a", "b"}).with({"only one"});
      },
      "x_g: given 1 label values for 2 labels");
  EXPECT_DEATH(
      {
        Registry r;
        r.histogram("x_h", "h", {}, {1, 1});
      },
      "x_h: bucket bounds must be finite and strictly increasing");
  EXPECT_DEATH(
      {
        Registry r;
        r.gauge("bad-name", "g");
      },
      "bad-name: not a valid metric name");
}

}  // namespace
}  // namespace ddprun::metrics
