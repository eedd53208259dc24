// The reports of a run built from synthetic records: the JSON parses back
// (with /usr/bin/python3's json) and holds every figure, per repeat and as
// medians and ratios; the SVG is well-formed XML with one timeline group per
// rank; the summary table puts the A/B ratio first.
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/json_writer.h"
#include "bench/report_json.h"
#include "bench/summary.h"
#include "bench/svg_plot.h"
#include "gtest/gtest.h"

namespace ckptfs::bench {
namespace {

constexpr int64_t kS = 1'000'000'000;
constexpr char kPython[] = "/usr/bin/python3";

// A run of 3 ranks, 2 repeats, targets A and B, phases save and load.
BenchResult SyntheticResult() {
  BenchResult result;
  result.start_ns = 1000 * kS;
  int64_t t = result.start_ns;
  for (int repeat = 0; repeat < 2; ++repeat) {
    for (const char* target : {"A", "B"}) {
      const int64_t save_s = std::string(target) == "A" ? 1 : 2;
      for (Phase phase : {Phase::kSave, Phase::kLoad}) {
        PhaseRecord record;
        record.target = target;
        record.repeat = repeat;
        record.phase = phase;
        record.rank_cpu_s = 0.25;
        record.target_cpu_s = 0.5;
        // The disk: busy half of every storm, 1 GB written or read per second of it.
        record.disk =
            DiskUse{static_cast<uint64_t>(save_s) * 1'000'000'000,
                    static_cast<uint64_t>(save_s) * 1'000'000'000, static_cast<double>(save_s) / 2};
        ProgressSegment seg{target, repeat, phase, t};
        result.segments.push_back(seg);
        for (int rank = 0; rank < 3; ++rank) {
          RankRecord r;
          r.rank = rank;
          r.times.start_ns = t;
          r.times.end_ns = t + save_s * kS;
          r.times.bytes = 1'000'000'000;
          if (phase == Phase::kLoad) r.times.first_byte_ns = t + kS / 10;
          record.ranks.push_back(r);
        }
        if (phase == Phase::kLoad) record.verified_bytes = 3'000'000'000;
        const int segment = static_cast<int>(result.segments.size()) - 1;
        result.points.push_back(ProgressPoint{segment, t, 0});
        result.points.push_back(ProgressPoint{segment, t + save_s * kS / 2, 1'500'000'000});
        result.points.push_back(ProgressPoint{segment, t + save_s * kS, 3'000'000'000});
        t += save_s * kS;
        result.records.push_back(record);
      }
    }
  }
  result.end_ns = t;
  result.targets.push_back(TargetDescription{"A",
                                             "/a",
                                             "/a",
                                             false,
                                             "fuse.ckptfs",
                                             true,
                                             false,
                                             "off (\"quoted\" note)",
                                             {"ckptfs-fuse"},
                                             ""});
  result.targets.push_back(
      TargetDescription{"B", "/b", "/b", false, "ext4", false, false, "off", {}, ""});
  result.notes.push_back("a note with a \\ backslash\nand a newline");
  result.disk = "vda";
  result.disk_reason = "holds B's directory";
  return result;
}

BenchOptions SyntheticOptions() {
  BenchOptions options;
  options.dir = "/a";
  options.baseline_dir = "/b";
  options.spec.ranks = 3;
  options.repeat = 2;
  options.phases = {Phase::kSave, Phase::kLoad};
  return options;
}

std::string TempPath(const std::string& name) {
  const char* tmp = std::getenv("TMPDIR");
  return absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name, ".", ::getpid());
}

// Runs python3 on `script` with `file` as argv[1]; its exit status.
int RunPython(const std::string& script, const std::string& file, std::string* output) {
  const std::string script_path = TempPath("check.py");
  EXPECT_TRUE(WriteTextFile(script_path, script).ok());
  FILE* pipe = ::popen(absl::StrCat(kPython, " ", script_path, " ", file, " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output->append(buffer, n);
  const int status = ::pclose(pipe);
  ::unlink(script_path.c_str());
  return status;
}

TEST(JsonWriterTest, EscapesAndCommas) {
  JsonWriter j;
  j.BeginObject().Key("s").String("a\"b\\c\n\x01").Key("n").Number(1.5).Key("i").Int(-3);
  j.Key("big").Number(4294967296.0).Key("nan").Number(NAN).Key("arr").BeginArray();
  j.Bool(true).Null().BeginObject().EndObject().EndArray().EndObject();
  EXPECT_EQ(j.str(),
            "{\"s\":\"a\\\"b\\\\c\\n\\u0001\",\"n\":1.5,\"i\":-3,\"big\":4294967296,"
            "\"nan\":null,\"arr\":[true,null,{}]}");
}

TEST(ReportTest, JsonParsesBackWithEveryFigure) {
  if (::access(kPython, X_OK) != 0) GTEST_SKIP() << "no " << kPython;
  const std::string json = BenchJson(SyntheticOptions(), SyntheticResult());
  const std::string path = TempPath("bench.json");
  ASSERT_TRUE(WriteTextFile(path, json).ok());
  const std::string script = R"PY(
import json, sys
d = json.load(open(sys.argv[1]))
assert d["tool"] == "ckptfs-bench"
assert d["options"]["ranks"] == 3 and d["options"]["repeat"] == 2
assert [t["label"] for t in d["targets"]] == ["A", "B"]
assert d["targets"][0]["commit_note"] == 'off ("quoted" note)'
assert d["notes"][0] == "a note with a \\ backslash\nand a newline"
assert len(d["phases"]) == 8, len(d["phases"])
save = [p for p in d["phases"] if p["phase"] == "save" and p["target"] == "A"]
assert len(save) == 2 and len(save[0]["ranks"]) == 3
f = save[0]["figures"]
assert abs(f["agg_gbps"] - 3.0) < 1e-9, f
assert abs(f["mlperf_duration_s"] - 1.0) < 1e-9
assert "target_cpu_s_per_gib" in f and "rank_cpu_s_per_gib" in f
assert f["disk_busy_pct"] == 50 and f["disk_write_gbps"] == 1.0, f
assert d["disk"] == {"device": "vda", "reason": "holds B's directory"}, d["disk"]
load = [p for p in d["phases"] if p["phase"] == "load"][0]["figures"]
assert load["verified_bytes"] == 3000000000 and abs(load["ttfb_p50_s"] - 0.1) < 1e-9
rows = {(r["phase"], r["figure"]): r for r in d["summary"]}
agg = rows[("save", "agg_gbps")]
assert agg["a"] == [3.0, 3.0] and agg["b"] == [1.5, 1.5], agg
assert abs(agg["ratio_median"] - 2.0) < 1e-9 and agg["median_a"] == 3.0
assert len(d["progress"]) == 8 and len(d["progress"][0]["samples"]) == 3
print("OK")
)PY";
  std::string output;
  EXPECT_EQ(RunPython(script, path, &output), 0) << output << "\n" << json;
  EXPECT_NE(output.find("OK"), std::string::npos) << output;
  ::unlink(path.c_str());
}

TEST(ReportTest, SvgHasATimelinePerRank) {
  const std::string svg = RenderSvg(SyntheticResult(), 3, "title <&> test");
  for (int rank = 0; rank < 3; ++rank) {
    const std::string group = absl::StrCat("<g class=\"rank\" id=\"rank-", rank, "\">");
    const size_t start = svg.find(group);
    ASSERT_NE(start, std::string::npos) << rank;
    const size_t end = svg.find("</g>", start);
    // 2 repeats x 2 targets x 2 phases = 8 bars.
    size_t bars = 0;
    for (size_t p = svg.find("<rect", start); p < end; p = svg.find("<rect", p + 1)) ++bars;
    EXPECT_EQ(bars, 8u) << rank;
  }
  EXPECT_EQ(svg.find("id=\"rank-3\""), std::string::npos);
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
  EXPECT_NE(svg.find("title &lt;&amp;&gt; test"), std::string::npos);
  if (::access(kPython, X_OK) != 0) return;
  const std::string path = TempPath("bench.svg");
  ASSERT_TRUE(WriteTextFile(path, svg).ok());
  std::string output;
  EXPECT_EQ(RunPython("import sys, xml.etree.ElementTree as E\n"
                      "r = E.parse(sys.argv[1]).getroot()\n"
                      "g = [e for e in r.iter('{http://www.w3.org/2000/svg}g') "
                      "if e.get('class') == 'rank']\n"
                      "assert len(g) == 3, len(g)\nprint('OK')\n",
                      path, &output),
            0)
      << output;
  ::unlink(path.c_str());
}

TEST(ReportTest, SummaryPutsRatiosFirst) {
  const std::string text = FormatSummary(SyntheticOptions(), SyntheticResult());
  const size_t header = text.find("phase");
  ASSERT_NE(header, std::string::npos) << text;
  const size_t ratio = text.find("A/B", header);
  const size_t a = text.find("A median", header);
  const size_t b = text.find("B median", header);
  EXPECT_LT(ratio, a);
  EXPECT_LT(a, b);
  // save aggregate GB/s: A 3.0, B 1.5, ratio 2.00x on its row.
  std::string line;
  for (absl::string_view l : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(l, "save ") && absl::StrContains(l, "aggregate GB/s"))
      line = std::string(l);
  }
  ASSERT_FALSE(line.empty()) << text;
  EXPECT_NE(line.find("2.00x"), std::string::npos) << line;
  EXPECT_NE(line.find("3.000"), std::string::npos) << line;
  EXPECT_NE(line.find("1.500"), std::string::npos) << line;
  EXPECT_NE(text.find("bytes verified"), std::string::npos);
  EXPECT_NE(text.find("ext4"), std::string::npos);
  EXPECT_NE(text.find("  disk: vda (holds B's directory)"), std::string::npos) << text;
  for (absl::string_view l : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(l, "save ") && absl::StrContains(l, "disk busy %")) line = std::string(l);
  }
  EXPECT_NE(line.find("1.00x"), std::string::npos) << text;  // 50% on both
  EXPECT_NE(text.find("disk write GB/s"), std::string::npos) << text;
  EXPECT_NE(text.find("disk read GB/s"), std::string::npos) << text;
}

TEST(ReportTest, SummaryWithoutBaselineShowsMedianMinMax) {
  BenchResult result = SyntheticResult();
  result.targets.pop_back();
  std::vector<PhaseRecord> only_a;
  for (const PhaseRecord& r : result.records) {
    if (r.target == "A") only_a.push_back(r);
  }
  result.records = only_a;
  BenchOptions options = SyntheticOptions();
  options.baseline_dir.clear();
  const std::string text = FormatSummary(options, result);
  const size_t header = text.find("phase  figure");
  ASSERT_NE(header, std::string::npos) << text;
  const std::string line = text.substr(header, text.find('\n', header) - header);
  EXPECT_LT(line.find("median"), line.find("min")) << line;
  EXPECT_LT(line.find("min"), line.find("max")) << line;
  EXPECT_NE(line.find("max"), std::string::npos) << line;
  EXPECT_EQ(text.find("A/B"), std::string::npos) << text;
}

}  // namespace
}  // namespace ckptfs::bench
