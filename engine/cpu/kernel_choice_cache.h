#ifndef PACELINE_ENGINE_CPU_KERNEL_CHOICE_CACHE_H_
#define PACELINE_ENGINE_CPU_KERNEL_CHOICE_CACHE_H_

// The file ChooseKernels (kernel_choice.h) keeps its choices in, one per
// CPU model in the state directory:
//   <dir>/cpu-kernels-<vendor>-f<family>-m<model>-s<stepping>.txt
// Text, a line per choice after a version line:
//   # paceline cpu kernel choices v1
//   <key> TAB <level> [TAB <what was measured>]
// where <key> is what decides the choice ("Q4_K cols=768 rows=57344
// threads=2 candidates=avx512,avx2") and <level> an IsaLevelName. Lines
// starting with '#' other than the first are comments. Deleting the file
// makes the next start measure again.

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace paceline::engine::cpu {

struct CachedChoice {
  std::string level;  // an IsaLevelName (the reader checks the syntax only)
  std::string note;   // what was measured; may be empty
};

using KernelCacheEntries = std::map<std::string, CachedChoice>;

// This CPU model's file in `dir`.
std::string KernelCacheFile(const std::string& dir);

// NotFound when the file does not exist; InvalidArgument naming the file
// and line when it is not one this version wrote.
absl::StatusOr<KernelCacheEntries> ReadKernelCache(const std::string& path);

// Writes `entries` (creating the directory), through a temporary file
// renamed over `path`, so a reader never sees half a file.
absl::Status WriteKernelCache(const std::string& path,
                              const KernelCacheEntries& entries);

}  // namespace paceline::engine::cpu

#endif  // PACELINE_ENGINE_CPU_KERNEL_CHOICE_CACHE_H_
