#include "engine/cpu/cpu_features.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace paceline::engine::cpu {
namespace {

TEST(CpuFeaturesTest, LevelNamesRoundTrip) {
  for (IsaLevel l : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512}) {
    IsaLevel parsed = IsaLevel::kScalar;
    ASSERT_TRUE(ParseIsaLevel(IsaLevelName(l), &parsed)) << IsaLevelName(l);
    EXPECT_EQ(parsed, l);
  }
  IsaLevel untouched = IsaLevel::kAvx2;
  EXPECT_FALSE(ParseIsaLevel("AVX2", &untouched));
  EXPECT_FALSE(ParseIsaLevel("avx512vnni", &untouched));
  EXPECT_FALSE(ParseIsaLevel("", &untouched));
  EXPECT_EQ(untouched, IsaLevel::kAvx2);
}

TEST(CpuFeaturesTest, LevelsImplyTheirFeatures) {
  const CpuFeatures& f = GetCpuFeatures();
  if (f.max_level >= IsaLevel::kAvx2) {
    EXPECT_TRUE(f.avx && f.avx2 && f.fma && f.f16c);
  }
  if (f.max_level >= IsaLevel::kAvx512) {
    EXPECT_TRUE(f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq);
  }
  // Sub-features never appear without their base.
  EXPECT_TRUE(f.avx512f || !(f.avx512_vnni || f.avx512bw || f.avx512_bf16));
  EXPECT_TRUE(f.avx || !(f.avx2 || f.fma || f.f16c));
}

#if defined(__x86_64__)
// GCC's own detection (cpuid + xgetbv in libgcc) as an independent check.
TEST(CpuFeaturesTest, AgreesWithCompilerBuiltins) {
  __builtin_cpu_init();
  const CpuFeatures& f = GetCpuFeatures();
  EXPECT_EQ(f.avx2, static_cast<bool>(__builtin_cpu_supports("avx2")));
  EXPECT_EQ(f.fma, static_cast<bool>(__builtin_cpu_supports("fma")));
  EXPECT_EQ(f.avx512f, static_cast<bool>(__builtin_cpu_supports("avx512f")));
  EXPECT_EQ(f.avx512bw, static_cast<bool>(__builtin_cpu_supports("avx512bw")));
  EXPECT_EQ(f.avx512vl, static_cast<bool>(__builtin_cpu_supports("avx512vl")));
  EXPECT_EQ(f.avx512_vnni,
            static_cast<bool>(__builtin_cpu_supports("avx512vnni")));
}
#endif

// The identity against the kernel's reading of cpuid (/proc/cpuinfo: its
// first processor's vendor_id, cpu family, model, stepping, model name).
TEST(CpuFeaturesTest, IdentityAgreesWithProcCpuinfo) {
  std::ifstream in("/proc/cpuinfo");
  if (!in) GTEST_SKIP() << "no /proc/cpuinfo";
  std::map<std::string, std::string> fields;
  for (std::string line; std::getline(in, line) && !line.empty();) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    fields[std::string(absl::StripAsciiWhitespace(line.substr(0, colon)))] =
        std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  }
  if (!fields.contains("cpu family")) GTEST_SKIP() << "not an x86 cpuinfo";
  const CpuFeatures& f = GetCpuFeatures();
  EXPECT_EQ(f.vendor, fields["vendor_id"]);
  EXPECT_EQ(absl::StrCat(f.family), fields["cpu family"]);
  EXPECT_EQ(absl::StrCat(f.model), fields["model"]);
  EXPECT_EQ(absl::StrCat(f.stepping), fields["stepping"]);
  EXPECT_EQ(f.brand, fields["model name"]);
  EXPECT_NE(CpuModelName().find(fields["model name"]), std::string::npos);
}

TEST(CpuFeaturesTest, CapLimitsTheEffectiveLevel) {
  const IsaLevel max = GetCpuFeatures().max_level;
  EXPECT_EQ(SetIsaLevelCap(IsaLevel::kScalar), IsaLevel::kScalar);
  EXPECT_EQ(EffectiveIsaLevel(), IsaLevel::kScalar);
  EXPECT_FALSE(EffectiveAvx512Vnni());
  const IsaLevel avx2 = SetIsaLevelCap(IsaLevel::kAvx2);
  EXPECT_EQ(avx2, max < IsaLevel::kAvx2 ? max : IsaLevel::kAvx2);
  EXPECT_FALSE(EffectiveAvx512Vnni());
  // A cap above the hardware has no effect.
  EXPECT_EQ(SetIsaLevelCap(IsaLevel::kAvx512), max);
  EXPECT_EQ(EffectiveAvx512Vnni(),
            max == IsaLevel::kAvx512 && GetCpuFeatures().avx512_vnni);
}

// PACELINE_CPU_ISA is read once, at first use: each case runs in a fresh
// process (a "threadsafe" death test re-executes the binary for it).
void ExpectEnvGives(const char* value, IsaLevel expected) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("PACELINE_CPU_ISA", value, 1);
        std::exit(EffectiveIsaLevel() == expected ? 0 : 1);
      },
      testing::ExitedWithCode(0), "")
      << "PACELINE_CPU_ISA=" << value;
}

TEST(CpuFeaturesTest, EnvironmentCapsTheLevel) {
  const IsaLevel max = GetCpuFeatures().max_level;
  ExpectEnvGives("scalar", IsaLevel::kScalar);
  ExpectEnvGives("avx2", std::min(max, IsaLevel::kAvx2));
  ExpectEnvGives("avx512", max);
  ExpectEnvGives("bogus", max);  // ignored
}

TEST(CpuFeaturesTest, SummaryNamesTheKernelLevel) {
  SetIsaLevelCap(IsaLevel::kScalar);
  const std::string scalar = CpuFeaturesSummary();
  SetIsaLevelCap(IsaLevel::kAvx512);
  const std::string full = CpuFeaturesSummary();
  EXPECT_EQ(scalar.rfind("cpu:", 0), 0u) << scalar;
  EXPECT_NE(scalar.find("kernels: scalar"), std::string::npos) << scalar;
  EXPECT_NE(full.find(absl::StrCat("kernels: ",
                                   IsaLevelName(GetCpuFeatures().max_level))),
            std::string::npos)
      << full;
  EXPECT_NE(full.find("PACELINE_CPU_ISA"), std::string::npos) << full;
}

}  // namespace
}  // namespace paceline::engine::cpu
