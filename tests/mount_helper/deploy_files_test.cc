// The deployment files in deploy/ stay true to the programs they configure:
//   - deploy/config/{meta,storage,fuse}.conf list every flag of ckptfs-meta,
//     ckptfs-storage and ckptfs-fuse with the program's own default, and
//     name no flag the program lacks (so a renamed flag fails here, not at
//     3 a.m. on a node);
//   - a daemon reads its config file, and a flag on its command line
//     overrides the file;
//   - deploy/systemd/ units pass `systemd-analyze verify` (with ExecStart
//     pointed at this build's programs), when systemd-analyze is installed.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/integration/child_process.h"
#include "tests/integration/local_cluster.h"
#include "tests/integration/posix_io.h"

namespace ckptfs::testing {
namespace {

const std::string kDeployDir = CKPTFS_DEPLOY_DIR;

// Flag name -> default, as `--helpfull` prints them:
//   "    --name (help, maybe over lines); default: VALUE;"
// `own` keeps only the flags defined in the program's main.cc (not Abseil's
// or gRPC's).
std::map<std::string, std::string> HelpfullDefaults(const std::string& program, bool own) {
  std::string text;
  RunShell(BinDir() + "/" + program + " --helpfull", &text);
  std::map<std::string, std::string> defaults;
  for (absl::string_view section : absl::StrSplit(text, "  Flags from ")) {
    const bool in_main = absl::StrContains(section.substr(0, section.find('\n')), "/main.cc:");
    if (own && !in_main) continue;
    std::vector<absl::string_view> entries = absl::StrSplit(section, "\n    --");
    for (size_t i = 1; i < entries.size(); ++i) {
      // One line, whitespace runs collapsed: help and default wrap anywhere.
      const std::string entry =
          absl::StrJoin(absl::StrSplit(entries[i].substr(0, entries[i].find("\n\n")),
                                       absl::ByAnyChar(" \n"), absl::SkipEmpty()),
                        " ");
      const size_t name_end = entry.find(' ');
      const size_t value_at = entry.rfind("; default: ");
      if (name_end == absl::string_view::npos || value_at == absl::string_view::npos) continue;
      absl::string_view value =
          absl::StripSuffix(absl::string_view(entry).substr(value_at + 11), ";");
      if (value.size() >= 2 && value.front() == '"') value = value.substr(1, value.size() - 2);
      defaults[std::string(entry.substr(0, name_end))] = std::string(value);
    }
  }
  return defaults;
}

// Flag name -> value of each `--name=value` line of a config file, commented
// out (`# --name=value`) or not.
std::map<std::string, std::string> ConfigFlags(const std::string& path) {
  std::ifstream in(path);
  std::map<std::string, std::string> flags;
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view rest = line;
    absl::ConsumePrefix(&rest, "# ");
    if (!absl::ConsumePrefix(&rest, "--")) continue;
    const size_t eq = rest.find('=');
    if (eq == absl::string_view::npos) continue;
    flags[std::string(rest.substr(0, eq))] = std::string(rest.substr(eq + 1));
  }
  return flags;
}

void ExpectConfigMatches(const std::string& program, const std::string& conf) {
  const std::string path = kDeployDir + "/config/" + conf;
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  const std::map<std::string, std::string> own = HelpfullDefaults(program, /*own=*/true);
  const std::map<std::string, std::string> all = HelpfullDefaults(program, /*own=*/false);
  const std::map<std::string, std::string> listed = ConfigFlags(path);
  ASSERT_FALSE(own.empty()) << "no flags parsed from " << program << " --helpfull";
  for (const auto& [name, value] : own) {
    auto it = listed.find(name);
    if (it == listed.end()) {
      ADD_FAILURE() << path << " does not list --" << name << " of " << program << " (default "
                    << value << ")";
    } else {
      EXPECT_EQ(it->second, value)
          << path << ": --" << name << " differs from " << program << "'s default";
    }
  }
  for (const auto& [name, value] : listed) {
    EXPECT_TRUE(all.count(name) == 1)
        << path << " lists --" << name << ", which " << program << " does not have";
  }
}

TEST(DeployFiles, MetaConfigListsEveryFlagWithItsDefault) {
  ExpectConfigMatches("ckptfs-meta", "meta.conf");
}
TEST(DeployFiles, StorageConfigListsEveryFlagWithItsDefault) {
  ExpectConfigMatches("ckptfs-storage", "storage.conf");
}
TEST(DeployFiles, FuseConfigListsEveryFlagWithItsDefault) {
  ExpectConfigMatches("ckptfs-fuse", "fuse.conf");
}

// The sample file with one setting switched on, then overridden on the
// command line: the daemon serves where the command line says.
TEST(DeployFiles, DaemonReadsItsConfigAndTheCommandLineWins) {
  absl::StatusOr<std::string> dir = MakeTempDir("ckptfs-deploy");
  ASSERT_TRUE(dir.ok()) << dir.status();
  const std::string conf = *dir + "/meta.conf";
  std::filesystem::copy_file(kDeployDir + "/config/meta.conf", conf);
  {
    std::ofstream out(conf, std::ios::app);
    out << "--listen=127.0.0.1:1\n--data_dir=" << *dir << "/meta\n";
  }
  absl::StatusOr<uint16_t> port = PickFreePort();
  ASSERT_TRUE(port.ok());
  const std::string listen = absl::StrCat("127.0.0.1:", *port);
  auto meta = ChildProcess::Start(
      {BinDir() + "/ckptfs-meta", "--flagfile=" + conf, "--listen=" + listen}, *dir + "/meta.log");
  ASSERT_TRUE(meta.ok()) << meta.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  std::string log;
  while (absl::Now() < deadline && (*meta)->Running()) {
    log = (*meta)->LogTail();
    if (absl::StrContains(log, "serving on " + listen)) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_TRUE(absl::StrContains(log, "serving on " + listen)) << log;
  EXPECT_TRUE(std::filesystem::exists(*dir + "/meta")) << "--data_dir of the file not used";
  (*meta)->Stop(SIGTERM, absl::Seconds(10));
  RemoveTree(*dir);
}

TEST(DeployFiles, SystemdUnitsVerify) {
  std::string ignored;
  if (RunShell("command -v systemd-analyze", &ignored) != 0) {
    GTEST_SKIP() << "systemd-analyze is not installed";
  }
  absl::StatusOr<std::string> dir = MakeTempDir("ckptfs-units");
  ASSERT_TRUE(dir.ok()) << dir.status();
  std::vector<std::string> units;
  for (const auto& entry : std::filesystem::directory_iterator(kDeployDir + "/systemd")) {
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    std::string name = entry.path().filename().string();
    // A template is verified as one instance of it.
    if (absl::StrContains(name, "@.")) name = absl::StrReplaceAll(name, {{"@.", "@disk0."}});
    std::ofstream(*dir + "/" + name)
        << absl::StrReplaceAll(text.str(), {{"/usr/local/bin/", BinDir() + "/"}});
    units.push_back(*dir + "/" + name);
  }
  ASSERT_GE(units.size(), 3u);
  std::string output;
  const int rc = RunShell("systemd-analyze verify --man=no " + absl::StrJoin(units, " "), &output);
  EXPECT_EQ(rc, 0) << output;
  RemoveTree(*dir);
}

}  // namespace
}  // namespace ckptfs::testing
