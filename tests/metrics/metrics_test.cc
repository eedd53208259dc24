// Unit tests of common/metrics: the registry's families and children, gauge
// callbacks, histograms, and the text exposition format, each checked by
// parsing back what Render printed (exposition_parser.h).
#include "common/metrics/metrics.h"

#include <cmath>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "common/metrics/errno_counters.h"
#include "common/metrics/exposition.h"
#include "gtest/gtest.h"
#include "tests/metrics/exposition_parser.h"

namespace ckptfs::metrics {
namespace {

using ::ckptfs::testing::Exposition;
using ::ckptfs::testing::ParseExposition;

Exposition Parse(const Registry& registry) {
  absl::StatusOr<Exposition> parsed = ParseExposition(registry.Render());
  EXPECT_TRUE(parsed.ok()) << parsed.status() << "\n" << registry.Render();
  return parsed.ok() ? *parsed : Exposition();
}

TEST(MetricsTest, CountersAndGaugesRenderWithHelpTypeAndLabels) {
  Registry registry;
  Counter& writes = registry.Counter("t_ops_total", "Operations.", {"op"}).WithLabels({"WRITE"});
  Counter& reads = registry.Counter("t_ops_total", "Operations.", {"op"}).WithLabels({"READ"});
  Gauge& used = registry.Gauge("t_used_bytes", "Bytes used.", {}).WithLabels({});
  writes.Increment(3);
  reads.Increment();
  used.Set(100);
  used.Sub(40);

  const Exposition e = Parse(registry);
  EXPECT_EQ(e.types.at("t_ops_total"), "counter");
  EXPECT_EQ(e.types.at("t_used_bytes"), "gauge");
  EXPECT_EQ(e.help.at("t_ops_total"), "Operations.");
  ASSERT_NE(e.Find("t_ops_total", {{"op", "WRITE"}}), nullptr);
  EXPECT_EQ(e.Find("t_ops_total", {{"op", "WRITE"}})->value, 3);
  EXPECT_EQ(e.Find("t_ops_total", {{"op", "READ"}})->value, 1);
  ASSERT_NE(e.Find("t_used_bytes"), nullptr);
  EXPECT_EQ(e.Find("t_used_bytes")->value, 60);
}

TEST(MetricsTest, SameNameIsSameFamilyAndChildrenAreStable) {
  Registry registry;
  Family<Counter>& a = registry.Counter("t_total", "x", {"k"});
  Family<Counter>& b = registry.Counter("t_total", "x", {"k"});
  EXPECT_EQ(&a, &b);
  EXPECT_EQ(&a.WithLabels({"v"}), &b.WithLabels({"v"}));
  EXPECT_NE(&a.WithLabels({"v"}), &a.WithLabels({"w"}));
}

TEST(MetricsDeathTest, SameNameWithAnotherTypeAborts) {
  Registry registry;
  registry.Counter("t_total", "x", {});
  EXPECT_DEATH(registry.Gauge("t_total", "x", {}), "registered twice");
  EXPECT_DEATH(registry.Counter("t_total", "x", {"extra"}), "registered twice");
  EXPECT_DEATH(registry.Counter("bad-name", "x", {}), "bad metric name");
  EXPECT_DEATH(registry.Histogram("t_h", "x", {}, {2, 1}), "ascending");
}

TEST(MetricsTest, LabelValuesAndHelpAreEscapedAndParseBack) {
  Registry registry;
  const std::string nasty = "a\"b\\c\nd";
  registry.Counter("t_total", "line one\nline two \\ end", {"path"})
      .WithLabels({nasty})
      .Increment(7);
  const std::string text = registry.Render();
  EXPECT_TRUE(absl::StrContains(text, R"(t_total{path="a\"b\\c\nd"} 7)")) << text;
  EXPECT_TRUE(absl::StrContains(text, R"(# HELP t_total line one\nline two \\ end)")) << text;
  const Exposition e = Parse(registry);
  ASSERT_NE(e.Find("t_total", {{"path", nasty}}), nullptr);
  EXPECT_EQ(e.help.at("t_total"), "line one\nline two \\ end");
}

TEST(MetricsTest, OutputIsOrderedByNameThenLabelsAndDeterministic) {
  Registry registry;
  registry.Gauge("t_zeta", "z", {}).WithLabels({}).Set(1);
  registry.Counter("t_alpha_total", "a", {"k"}).WithLabels({"b"}).Increment();
  registry.Counter("t_alpha_total", "a", {"k"}).WithLabels({"a"}).Increment();
  const std::string first = registry.Render();
  EXPECT_EQ(first, registry.Render());
  const Exposition e = Parse(registry);
  ASSERT_EQ(e.samples.size(), 3u);
  EXPECT_EQ(e.samples[0].name, "t_alpha_total");
  EXPECT_EQ(e.samples[0].labels.at("k"), "a");
  EXPECT_EQ(e.samples[1].labels.at("k"), "b");
  EXPECT_EQ(e.samples[2].name, "t_zeta");
  // HELP and TYPE come right before each family's samples.
  std::vector<std::string> lines = absl::StrSplit(first, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_EQ(lines[0], "# HELP t_alpha_total a");
  EXPECT_EQ(lines[1], "# TYPE t_alpha_total counter");
  EXPECT_EQ(lines[4], "# HELP t_zeta z");
}

TEST(MetricsTest, HistogramBucketsAreCumulativeInclusiveAndInfEqualsCount) {
  Registry registry;
  Histogram& h =
      registry.Histogram("t_seconds", "latency", {"op"}, {0.1, 1, 10}).WithLabels({"READ"});
  for (double v : {0.05, 0.1, 0.5, 1.0, 5.0, 100.0, 1000.0}) h.Observe(v);
  const Exposition e = Parse(registry);  // checks monotone buckets and +Inf == count
  EXPECT_EQ(e.types.at("t_seconds"), "histogram");
  auto bucket = [&](const char* le) {
    const auto* s = e.Find("t_seconds_bucket", {{"op", "READ"}, {"le", le}});
    return s == nullptr ? -1 : s->value;
  };
  EXPECT_EQ(bucket("0.1"), 2);  // 0.05 and 0.1: a bound is inclusive
  EXPECT_EQ(bucket("1"), 4);
  EXPECT_EQ(bucket("10"), 5);
  EXPECT_EQ(bucket("+Inf"), 7);
  ASSERT_NE(e.Find("t_seconds_count", {{"op", "READ"}}), nullptr);
  EXPECT_EQ(e.Find("t_seconds_count", {{"op", "READ"}})->value, 7);
  EXPECT_DOUBLE_EQ(e.Find("t_seconds_sum", {{"op", "READ"}})->value, 1106.65);
}

TEST(MetricsTest, LatencyBucketsParseAsAscendingBounds) {
  Registry registry;
  Histogram& h = registry.Histogram("t_latency_seconds", "l", {}, LatencyBuckets()).WithLabels({});
  h.ObserveDuration(absl::Milliseconds(3));
  const Exposition e = Parse(registry);
  EXPECT_EQ(e.Find("t_latency_seconds_bucket", {{"le", "0.0025"}})->value, 0);
  EXPECT_EQ(e.Find("t_latency_seconds_bucket", {{"le", "0.005"}})->value, 1);
  EXPECT_EQ(e.Find("t_latency_seconds_bucket", {{"le", "5e-05"}})->value, 0);
}

TEST(MetricsTest, GaugeCallbacksAreSummedAndGoAwayWithTheirHandle) {
  Registry registry;
  Gauge& gauge = registry.Gauge("t_pool_bytes", "pool", {}).WithLabels({});
  gauge.Set(1);
  std::optional<CallbackHandle> first = registry.AddGaugeCallback(gauge, [] { return 10.0; });
  CallbackHandle second = registry.AddGaugeCallback(gauge, [] { return 100.0; });
  EXPECT_EQ(Parse(registry).Find("t_pool_bytes")->value, 111);
  first.reset();
  EXPECT_EQ(Parse(registry).Find("t_pool_bytes")->value, 101);
  CallbackHandle moved = std::move(second);
  EXPECT_EQ(Parse(registry).Find("t_pool_bytes")->value, 101);
  moved.Reset();
  EXPECT_EQ(Parse(registry).Find("t_pool_bytes")->value, 1);
}

TEST(MetricsTest, ConcurrentUpdatesAreAllCounted) {
  Registry registry;
  Counter& counter = registry.Counter("t_total", "c", {}).WithLabels({});
  Histogram& h = registry.Histogram("t_seconds", "h", {}, {1}).WithLabels({});
  Gauge& gauge = registry.Gauge("t_in_flight", "g", {}).WithLabels({});
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        gauge.Add(1);
        counter.Increment(2);
        h.Observe(0.5);
        gauge.Sub(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const Exposition e = Parse(registry);
  EXPECT_EQ(e.Find("t_total")->value, 160000);
  EXPECT_EQ(e.Find("t_seconds_count")->value, 80000);
  EXPECT_DOUBLE_EQ(e.Find("t_seconds_sum")->value, 40000);
  EXPECT_EQ(e.Find("t_in_flight")->value, 0);
}

TEST(MetricsTest, ErrnoCountersUseErrnoNames) {
  Registry registry;
  ErrnoCounters errors(&registry.Counter("t_errors_total", "e", {"errno"}));
  errors.For(ENOENT).Increment();
  errors.For(ENOENT).Increment();
  errors.For(EIO).Increment();
  errors.For(4000).Increment();
  const Exposition e = Parse(registry);
  EXPECT_EQ(e.Find("t_errors_total", {{"errno", "ENOENT"}})->value, 2);
  EXPECT_EQ(e.Find("t_errors_total", {{"errno", "EIO"}})->value, 1);
  EXPECT_EQ(e.Find("t_errors_total", {{"errno", "E4000"}})->value, 1);
}

TEST(ExpositionTest, FormatValue) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(42), "42");
  EXPECT_EQ(FormatValue(-3), "-3");
  EXPECT_EQ(FormatValue(0.25), "0.25");
  EXPECT_EQ(FormatValue(1e-4), "0.0001");
  EXPECT_EQ(FormatValue(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(FormatValue(HUGE_VAL), "+Inf");
  EXPECT_EQ(FormatValue(-HUGE_VAL), "-Inf");
  EXPECT_EQ(FormatValue(NAN), "NaN");
}

TEST(ExpositionTest, ParserRejectsMalformedText) {
  // The parser is what the other tests rely on: it must fail on bad input.
  EXPECT_FALSE(ParseExposition("t_total 1\n").ok());  // no TYPE
  EXPECT_FALSE(ParseExposition("# TYPE t counter\nt{a=\"x} 1\n").ok());
  EXPECT_FALSE(ParseExposition("# TYPE t counter\nt one\n").ok());
  EXPECT_FALSE(ParseExposition("# TYPE t counter\nt 1").ok());  // no final newline
  EXPECT_FALSE(ParseExposition("# TYPE h histogram\nh_bucket{le=\"1\"} 2\n"
                               "h_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n")
                   .ok());  // not monotone
  EXPECT_FALSE(ParseExposition("# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\n"
                               "h_count 3\n")
                   .ok());  // +Inf != count
  EXPECT_TRUE(ParseExposition("# HELP t x\n# TYPE t counter\nt{a=\"\\\"\"} 1\n").ok());
}

}  // namespace
}  // namespace ckptfs::metrics
