#ifndef PACELINE_ENGINE_CPU_CPU_FEATURES_H_
#define PACELINE_ENGINE_CPU_CPU_FEATURES_H_

// What the CPU can run, detected once at run time (cpuid + xgetbv), and the
// instruction-set level the CPU kernels use.
//
// The binary is built for the baseline x86-64 ISA; kernels for AVX2 and
// AVX-512 are compiled with function-level target attributes and chosen per
// call from EffectiveIsaLevel(). Levels:
//   scalar  portable C++, every machine
//   avx2    AVX2 + FMA + F16C (Haswell / Zen and later)
//   avx512  AVX-512 F/BW/VL/DQ on top of avx2 (Skylake-SP and later); the
//           int8 kernels additionally need AVX-512 VNNI and otherwise use
//           the avx2 ones
// Each level requires the OS to save the matching register state (XCR0).
//
// The environment variable PACELINE_CPU_ISA=scalar|avx2|avx512 caps the
// level (read once, at first use): to work around a kernel bug on some CPU,
// or to exercise a slower path. A cap above what the CPU supports has no
// effect; an unknown value is ignored and reported in CpuFeaturesSummary().
//
// Thread-safety: every function may be called from any thread.
// SetIsaLevelCap is meant for tests and start-up; kernels read the level
// once per call, so a change affects the next call.

#include <string>

#include "absl/strings/string_view.h"

namespace paceline::engine::cpu {

enum class IsaLevel : int { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

// "scalar", "avx2", "avx512".
absl::string_view IsaLevelName(IsaLevel level);

// Parses a level name (as above, case-sensitive). False when unknown.
bool ParseIsaLevel(absl::string_view name, IsaLevel* level);

// Features as the CPU reports them, each already combined with the OS
// support it needs (e.g. avx512f is false when XCR0 lacks the ZMM state).
struct CpuFeatures {
  bool avx = false;
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512_vnni = false;
  bool avx_vnni = false;  // VEX-encoded VNNI (e.g. Alder Lake); reported only
  bool avx512_bf16 = false;  // reported only
  bool amx_tile = false;     // reported only (Linux also needs arch_prctl)
  bool amx_int8 = false;     // reported only
  bool amx_bf16 = false;     // reported only
  IsaLevel max_level = IsaLevel::kScalar;  // the highest level the CPU runs
  // Which CPU this is (cpuid), for the kernel choices measured per CPU
  // model (kernel_choice.h) and for benchmark reports: e.g.
  // "AuthenticAMD", family 25, model 17, stepping 1, "AMD EPYC 9R14 ...".
  // Family and model as the vendors number them (extended fields added).
  std::string vendor;
  int family = 0;
  int model = 0;
  int stepping = 0;
  std::string brand;  // "" when the CPU has no brand string
};

// "GenuineIntel family 6 model 207 stepping 2 (Intel(R) Xeon(R) ...)".
std::string CpuModelName();

// Detected once; never changes.
const CpuFeatures& GetCpuFeatures();

// The level kernels use: min(GetCpuFeatures().max_level, cap), where the cap
// comes from PACELINE_CPU_ISA unless SetIsaLevelCap has set one.
IsaLevel EffectiveIsaLevel();

// Whether the AVX-512 int8 kernels (VNNI) run at the effective level.
bool EffectiveAvx512Vnni();

// Replaces the cap (PACELINE_CPU_ISA's, or a previous call's) and returns
// the resulting effective level. Tests iterate over every level this way.
IsaLevel SetIsaLevelCap(IsaLevel cap);

// One line for logs and `--version`-style output, e.g.
// "cpu: avx2 fma f16c avx512f/bw/vl/dq avx512_vnni avx_vnni avx512_bf16
//  amx(tile int8 bf16); kernels: avx512 (PACELINE_CPU_ISA unset)".
std::string CpuFeaturesSummary();

}  // namespace paceline::engine::cpu

#endif  // PACELINE_ENGINE_CPU_CPU_FEATURES_H_
