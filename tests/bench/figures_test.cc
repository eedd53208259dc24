// Figures computed from synthetic timings: aggregate and MLPerf throughput,
// percentiles, commit latency and release, time to first byte, CPU per GiB,
// medians and median ratios over repeats.
#include "bench/figures.h"

#include <cmath>

#include "bench/summary.h"
#include "gtest/gtest.h"

namespace ckptfs::bench {
namespace {

constexpr int64_t kS = 1'000'000'000;  // one second in ns
constexpr double kGiB = 1024.0 * 1024 * 1024;

RankRecord Rank(int rank, double start_s, double end_s, uint64_t bytes, double first_byte_s = -1) {
  RankRecord r;
  r.rank = rank;
  r.times.start_ns = static_cast<int64_t>(start_s * kS) + 100 * kS;
  r.times.end_ns = static_cast<int64_t>(end_s * kS) + 100 * kS;
  r.times.bytes = bytes;
  if (first_byte_s >= 0) r.times.first_byte_ns = static_cast<int64_t>(first_byte_s * kS) + 100 * kS;
  return r;
}

double Get(const Figures& figures, const char* key) {
  std::optional<double> value = FindFigure(figures, key);
  EXPECT_TRUE(value.has_value()) << key;
  return value.value_or(NAN);
}

TEST(PercentileTest, NearestRank) {
  std::vector<double> hundred;
  for (int i = 100; i >= 1; --i) hundred.push_back(i);
  EXPECT_EQ(Percentile(hundred, 50), 50);
  EXPECT_EQ(Percentile(hundred, 99), 99);
  EXPECT_EQ(Percentile(hundred, 100), 100);
  EXPECT_EQ(Percentile({7}, 99), 7);
  EXPECT_EQ(Percentile({3, 1, 2}, 50), 2);
  EXPECT_EQ(Percentile({1, 2, 3, 4}, 50), 2);
  EXPECT_EQ(Percentile({1, 2, 3, 4}, 99), 4);
}

TEST(MedianTest, OddAndEven) {
  EXPECT_EQ(Median({5, 1, 3}), 3);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(Median({9}), 9);
}

TEST(MedianTest, OfRatiosSkipsZeroDenominators) {
  EXPECT_EQ(MedianOfRatios({2, 4, 9}, {1, 2, 3}), 2.0);
  EXPECT_EQ(MedianOfRatios({2, 4, 9, 1}, {1, 2, 3, 0}), 2.0);
  EXPECT_EQ(MedianOfRatios({1, 3}, {2, 2}), 1.0);
  EXPECT_FALSE(MedianOfRatios({1}, {0}).has_value());
  EXPECT_FALSE(MedianOfRatios({}, {}).has_value());
}

TEST(FiguresTest, SaveAggregateAndMlperf) {
  PhaseRecord record;
  record.phase = Phase::kSave;
  // 4 ranks of 1 GB; first start 0 s, last end 4 s; the slowest takes 3 s.
  record.ranks = {Rank(0, 0.0, 2.0, 1'000'000'000), Rank(1, 0.5, 1.5, 1'000'000'000),
                  Rank(2, 1.0, 4.0, 1'000'000'000), Rank(3, 0.0, 2.5, 1'000'000'000)};
  record.rank_cpu_s = 8;
  record.rank_system_cpu_s = 3;
  record.target_cpu_s = 2;
  const Figures f = ComputeFigures(record);
  EXPECT_DOUBLE_EQ(Get(f, "agg_gbps"), 1.0);  // 4 GB / 4 s
  EXPECT_DOUBLE_EQ(Get(f, "mlperf_duration_s"), 3.0);
  EXPECT_DOUBLE_EQ(Get(f, "mlperf_gbps"), 4.0 / 3.0);
  EXPECT_DOUBLE_EQ(Get(f, "rank_p50_s"), 2.0);  // times 1, 2, 2.5, 3
  EXPECT_DOUBLE_EQ(Get(f, "rank_p99_s"), 3.0);
  EXPECT_DOUBLE_EQ(Get(f, "wall_s"), 4.0);
  EXPECT_DOUBLE_EQ(Get(f, "bytes"), 4e9);
  EXPECT_DOUBLE_EQ(Get(f, "rank_cpu_s_per_gib"), 8 / (4e9 / kGiB));
  EXPECT_DOUBLE_EQ(Get(f, "rank_system_cpu_s_per_gib"), 3 / (4e9 / kGiB));
  EXPECT_DOUBLE_EQ(Get(f, "target_cpu_s_per_gib"), 2 / (4e9 / kGiB));
  EXPECT_FALSE(FindFigure(f, "ttfb_p50_s").has_value());
  EXPECT_FALSE(FindFigure(f, "commit_p50_s").has_value());
  EXPECT_FALSE(FindFigure(f, "verified_bytes").has_value());
}

TEST(FiguresTest, NoTargetProcessesMeansNoTargetCpu) {
  PhaseRecord record;
  record.ranks = {Rank(0, 0, 1, 1 << 30)};
  record.rank_cpu_s = 0.5;
  const Figures f = ComputeFigures(record);
  EXPECT_DOUBLE_EQ(Get(f, "rank_cpu_s_per_gib"), 0.5);
  EXPECT_FALSE(FindFigure(f, "target_cpu_s").has_value());
  EXPECT_FALSE(FindFigure(f, "target_cpu_s_per_gib").has_value());
}

TEST(FiguresTest, LoadTimeToFirstByteAndVerifiedBytes) {
  PhaseRecord record;
  record.phase = Phase::kLoad;
  record.ranks = {Rank(0, 0, 1, 100, 0.25), Rank(1, 0, 2, 100, 0.5), Rank(2, 1, 2, 100, 1.75)};
  record.verified_bytes = 300;
  const Figures f = ComputeFigures(record);
  EXPECT_DOUBLE_EQ(Get(f, "ttfb_p50_s"), 0.5);  // 0.25, 0.5, 0.75
  EXPECT_DOUBLE_EQ(Get(f, "ttfb_max_s"), 0.75);
  EXPECT_DOUBLE_EQ(Get(f, "verified_bytes"), 300);
  EXPECT_DOUBLE_EQ(Get(f, "agg_gbps"), 300 / 2.0 / 1e9);
}

TEST(FiguresTest, CommitLatencyAndRelease) {
  PhaseRecord record;
  record.phase = Phase::kCommit;
  // Arrivals at 0, 0.1, 0.3; all return at about 0.31-0.32.
  record.ranks = {Rank(0, 0.0, 0.31, 0), Rank(1, 0.1, 0.31, 0), Rank(2, 0.3, 0.32, 0)};
  const Figures f = ComputeFigures(record);
  EXPECT_NEAR(Get(f, "commit_p50_s"), 0.21, 1e-9);
  EXPECT_NEAR(Get(f, "commit_max_s"), 0.31, 1e-9);
  EXPECT_NEAR(Get(f, "commit_p99_s"), 0.31, 1e-9);
  EXPECT_NEAR(Get(f, "commit_release_s"), 0.02, 1e-9);
  EXPECT_FALSE(FindFigure(f, "agg_gbps").has_value());
  EXPECT_FALSE(FindFigure(f, "rank_cpu_s_per_gib").has_value());
  EXPECT_TRUE(FindFigure(f, "rank_cpu_s").has_value());
}

TEST(FiguresTest, DiskBusyAndBytesPerSecondOfTheStorm) {
  PhaseRecord save;
  save.phase = Phase::kSave;
  save.ranks = {Rank(0, 0, 2, 1'000'000'000), Rank(1, 0, 2, 1'000'000'000)};
  EXPECT_FALSE(FindFigure(ComputeFigures(save), "disk_busy_pct").has_value());
  save.disk = DiskUse{500'000'000, 3'000'000'000, 1.5};
  Figures f = ComputeFigures(save);
  EXPECT_DOUBLE_EQ(Get(f, "disk_busy_pct"), 75.0);  // 1.5 s of the 2 s storm
  EXPECT_DOUBLE_EQ(Get(f, "disk_write_gbps"), 1.5);
  EXPECT_FALSE(FindFigure(f, "disk_read_gbps").has_value());
  // Busy time counted just outside the storm never reads as over 100%.
  save.disk->busy_s = 2.2;
  EXPECT_DOUBLE_EQ(Get(ComputeFigures(save), "disk_busy_pct"), 100.0);

  PhaseRecord load = save;
  load.phase = Phase::kLoad;
  f = ComputeFigures(load);
  EXPECT_DOUBLE_EQ(Get(f, "disk_read_gbps"), 0.25);
  EXPECT_FALSE(FindFigure(f, "disk_write_gbps").has_value());

  PhaseRecord commit = save;
  commit.phase = Phase::kCommit;
  EXPECT_FALSE(FindFigure(ComputeFigures(commit), "disk_busy_pct").has_value());
}

TEST(FiguresTest, FiguresFollowCatalogueOrder) {
  PhaseRecord record;
  record.phase = Phase::kBcast;
  record.ranks = {Rank(0, 0, 1, 10, 0.5)};
  const Figures f = ComputeFigures(record);
  size_t last = 0;
  for (const Figure& figure : f) {
    size_t pos = 0;
    while (FigureCatalogue()[pos].key != figure.key) ++pos;
    EXPECT_GE(pos, last) << figure.key;
    last = pos;
  }
  EXPECT_TRUE(ComputeFigures(PhaseRecord{}).empty());
}

TEST(SummaryTest, MediansAndMedianOfRatiosPerRepeat) {
  // A saves 1 GB in 1, 2, 4 s; B in 2, 2, 2 s: per-repeat ratios of GB/s
  // are 2, 1, 0.5 -> median 1; medians of A 0.5 GB/s... see below.
  std::vector<PhaseRecord> records;
  const double a_time[] = {1, 2, 4}, b_time[] = {2, 2, 2};
  for (int repeat = 0; repeat < 3; ++repeat) {
    PhaseRecord a;
    a.target = "A";
    a.repeat = repeat;
    a.ranks = {Rank(0, 0, a_time[repeat], 1'000'000'000)};
    PhaseRecord b = a;
    b.target = "B";
    b.ranks = {Rank(0, 0, b_time[repeat], 1'000'000'000)};
    records.push_back(a);
    records.push_back(b);
  }
  bool found = false;
  for (const SummaryRow& row : Summarize(records, 3)) {
    if (row.phase != Phase::kSave || row.key != "agg_gbps") continue;
    found = true;
    EXPECT_DOUBLE_EQ(*row.median_a, 0.5);  // 1, 0.5, 0.25
    EXPECT_DOUBLE_EQ(*row.median_b, 0.5);
    EXPECT_DOUBLE_EQ(*row.ratio, 1.0);  // 2, 1, 0.5
    ASSERT_EQ(row.a.size(), 3u);
    EXPECT_DOUBLE_EQ(*row.a[2], 0.25);
  }
  EXPECT_TRUE(found);
}

TEST(SummaryTest, RatioNeedsBothTargetsInTheSameRepeat) {
  std::vector<PhaseRecord> records;
  PhaseRecord a;
  a.target = "A";
  a.repeat = 0;
  a.ranks = {Rank(0, 0, 1, 1000)};
  records.push_back(a);
  PhaseRecord b = a;
  b.target = "B";
  b.repeat = 1;
  records.push_back(b);
  for (const SummaryRow& row : Summarize(records, 2)) {
    EXPECT_FALSE(row.ratio.has_value()) << row.key;
  }
}

}  // namespace
}  // namespace ckptfs::bench
