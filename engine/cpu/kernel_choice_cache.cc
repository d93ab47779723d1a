#include "engine/cpu/kernel_choice_cache.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "engine/cpu/cpu_features.h"

namespace paceline::engine::cpu {
namespace {

constexpr const char* kVersionLine = "# paceline cpu kernel choices v1";

// Letters, digits and '-' only: a vendor string is the CPU's to choose.
std::string FileSafe(const std::string& s) {
  std::string out;
  for (char c : s) {
    out += absl::ascii_isalnum(static_cast<unsigned char>(c)) ? c : '-';
  }
  return out.empty() ? "unknown" : out;
}

}  // namespace

std::string KernelCacheFile(const std::string& dir) {
  const CpuFeatures& f = GetCpuFeatures();
  return absl::StrCat(dir, "/cpu-kernels-", FileSafe(f.vendor), "-f", f.family,
                      "-m", f.model, "-s", f.stepping, ".txt");
}

absl::StatusOr<KernelCacheEntries> ReadKernelCache(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text,
                   ReadWholeFile(path, "kernel choice cache"));
  const std::vector<absl::string_view> lines =
      absl::StrSplit(text, '\n', absl::SkipEmpty());
  if (lines.empty() || lines[0] != kVersionLine) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ":1: not \"", kVersionLine, "\""));
  }
  KernelCacheEntries entries;
  for (size_t i = 1; i < lines.size(); ++i) {
    if (absl::StartsWith(lines[i], "#")) continue;
    const std::vector<absl::string_view> fields =
        absl::StrSplit(lines[i], absl::MaxSplits('\t', 2));
    IsaLevel level;
    if (fields.size() < 2 || fields[0].empty() ||
        !ParseIsaLevel(fields[1], &level)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", i + 1,
                       ": want KEY<tab>LEVEL[<tab>NOTE], LEVEL one of "
                       "scalar, avx2, avx512"));
    }
    entries[std::string(fields[0])] = {
        std::string(fields[1]),
        fields.size() > 2 ? std::string(fields[2]) : std::string()};
  }
  return entries;
}

absl::Status WriteKernelCache(const std::string& path,
                              const KernelCacheEntries& entries) {
  const std::filesystem::path file(path);
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  if (ec) {
    return absl::PermissionDeniedError(absl::StrCat(
        "cannot create ", file.parent_path().string(), ": ", ec.message()));
  }
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << kVersionLine << "\n# " << CpuModelName() << "\n";
    for (const auto& [key, choice] : entries) {
      out << key << '\t' << choice.level;
      if (!choice.note.empty()) out << '\t' << choice.note;
      out << '\n';
    }
    out.flush();
    if (!out) {
      std::filesystem::remove(tmp, ec);
      return absl::PermissionDeniedError(absl::StrCat("cannot write ", tmp));
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return absl::PermissionDeniedError(
        absl::StrCat("cannot rename ", tmp, " to ", path, ": ", ec.message()));
  }
  return absl::OkStatus();
}

}  // namespace paceline::engine::cpu
