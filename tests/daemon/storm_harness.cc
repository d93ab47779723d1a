#include "tests/daemon/storm_harness.h"

#include <sys/resource.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace paceline::server::storm {

ProcessResources ReadResources(pid_t pid) {
  ProcessResources out;
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    std::vector<absl::string_view> f =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (f.size() < 2) continue;
    if (f[0] == "Threads:") {
      EXPECT_TRUE(absl::SimpleAtoi(f[1], &out.threads));
    } else if (f[0] == "VmRSS:") {
      EXPECT_TRUE(absl::SimpleAtoi(f[1], &out.rss_kb));
    }
  }
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(
           absl::StrCat("/proc/", pid, "/fd"), ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++out.fds;
  }
  return out;
}

std::string Describe(const ProcessResources& r) {
  return absl::StrCat("threads ", r.threads, ", fds ", r.fds, ", RSS ",
                      r.rss_kb / 1024, " MiB");
}

std::string Describe(const v1::ServerStatus& s) {
  return absl::StrCat("kv used ", s.kv_cache().used_blocks(), ", running ",
                      s.running_sequences(), ", waiting ", s.waiting_requests(),
                      ", paced ", s.paced_streams(), ", buffered ",
                      s.buffered_tokens());
}

bool Idle(const v1::ServerStatus& s) {
  return s.kv_cache().used_blocks() == 0 && s.running_sequences() == 0 &&
         s.waiting_requests() == 0 && s.paced_streams() == 0 &&
         s.buffered_tokens() == 0;
}

void RaiseFdLimit() {
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  limit.rlim_cur = std::min<rlim_t>(limit.rlim_max, 8192);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &limit), 0);
  ASSERT_GE(limit.rlim_cur, 4096u) << "the hard fd limit is too low";
}

v1::GenerateRequest Request(int32_t max_tokens, double pace) {
  v1::GenerateRequest r;
  r.set_text("Once upon a time");
  r.mutable_sampling()->set_temperature(0.8);
  r.mutable_stopping()->set_max_tokens(max_tokens);
  r.mutable_stopping()->set_ignore_eos(true);
  if (pace > 0) r.mutable_delivery()->set_pace_tokens_per_s(pace);
  return r;
}

}  // namespace paceline::server::storm
