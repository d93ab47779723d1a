#include "engine/cpu/cpu_features.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define PACELINE_X86 1
#endif

namespace paceline::engine::cpu {
namespace {

constexpr const char* kIsaEnv = "PACELINE_CPU_ISA";

#ifdef PACELINE_X86
struct CpuidRegs {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

CpuidRegs Cpuid(unsigned leaf, unsigned subleaf) {
  CpuidRegs r;
  if (!__get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx)) {
    return CpuidRegs{};  // leaf not supported: every feature bit reads 0
  }
  return r;
}

// XCR0: which register states the OS saves on context switch. Inline asm so
// that this file needs no -mxsave.
uint64_t ReadXcr0() {
  unsigned eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return static_cast<uint64_t>(edx) << 32 | eax;
}

bool Bit(unsigned reg, int bit) { return (reg >> bit) & 1u; }

// Vendor, family, model, stepping and brand string (leaves 0, 1 and
// 0x80000002..4).
void DetectIdentity(CpuFeatures& f) {
  const CpuidRegs l0 = Cpuid(0, 0);
  char vendor[13] = {};
  std::memcpy(vendor, &l0.ebx, 4);
  std::memcpy(vendor + 4, &l0.edx, 4);
  std::memcpy(vendor + 8, &l0.ecx, 4);
  f.vendor = vendor;
  const unsigned eax = Cpuid(1, 0).eax;
  const int base_family = static_cast<int>((eax >> 8) & 0xF);
  const int base_model = static_cast<int>((eax >> 4) & 0xF);
  f.stepping = static_cast<int>(eax & 0xF);
  f.family = base_family == 0xF
                 ? base_family + static_cast<int>((eax >> 20) & 0xFF)
                 : base_family;
  f.model = base_family == 0x6 || base_family == 0xF
                ? base_model | static_cast<int>((eax >> 16) & 0xF) << 4
                : base_model;
  if (Cpuid(0x80000000, 0).eax < 0x80000004) return;
  char brand[49] = {};
  for (unsigned i = 0; i < 3; ++i) {
    const CpuidRegs r = Cpuid(0x80000002 + i, 0);
    std::memcpy(brand + 16 * i, &r.eax, 4);
    std::memcpy(brand + 16 * i + 4, &r.ebx, 4);
    std::memcpy(brand + 16 * i + 8, &r.ecx, 4);
    std::memcpy(brand + 16 * i + 12, &r.edx, 4);
  }
  f.brand = std::string(absl::StripAsciiWhitespace(brand));
}

CpuFeatures Detect() {
  CpuFeatures f;
  DetectIdentity(f);
  const unsigned max_leaf = Cpuid(0, 0).eax;
  const CpuidRegs l1 = Cpuid(1, 0);
  const bool osxsave = Bit(l1.ecx, 27);
  const uint64_t xcr0 = osxsave ? ReadXcr0() : 0;
  const bool os_ymm = (xcr0 & 0x6) == 0x6;  // SSE + AVX state
  const bool os_zmm =
      os_ymm && (xcr0 & 0xE0) == 0xE0;  // opmask, ZMM_Hi256, Hi16_ZMM
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;  // XTILECFG + XTILEDATA

  f.avx = os_ymm && Bit(l1.ecx, 28);
  f.fma = f.avx && Bit(l1.ecx, 12);
  f.f16c = f.avx && Bit(l1.ecx, 29);
  if (max_leaf >= 7) {
    const CpuidRegs l7 = Cpuid(7, 0);
    const CpuidRegs l7s1 = Cpuid(7, 1);
    f.avx2 = f.avx && Bit(l7.ebx, 5);
    f.avx512f = os_zmm && Bit(l7.ebx, 16);
    f.avx512dq = f.avx512f && Bit(l7.ebx, 17);
    f.avx512bw = f.avx512f && Bit(l7.ebx, 30);
    f.avx512vl = f.avx512f && Bit(l7.ebx, 31);
    f.avx512_vnni = f.avx512f && Bit(l7.ecx, 11);
    f.amx_bf16 = os_amx && Bit(l7.edx, 22);
    f.amx_tile = os_amx && Bit(l7.edx, 24);
    f.amx_int8 = os_amx && Bit(l7.edx, 25);
    f.avx_vnni = f.avx2 && Bit(l7s1.eax, 4);
    f.avx512_bf16 = f.avx512f && Bit(l7s1.eax, 5);
  }
  if (f.avx2 && f.fma && f.f16c) f.max_level = IsaLevel::kAvx2;
  if (f.max_level == IsaLevel::kAvx2 && f.avx512f && f.avx512bw && f.avx512vl &&
      f.avx512dq) {
    f.max_level = IsaLevel::kAvx512;
  }
  return f;
}
#else
CpuFeatures Detect() { return CpuFeatures{}; }
#endif

// The cap from the environment, read once.
struct EnvCap {
  bool set = false;    // PACELINE_CPU_ISA present
  bool valid = false;  // and understood
  std::string raw;
  IsaLevel level = IsaLevel::kAvx512;
};

const EnvCap& GetEnvCap() {
  static const EnvCap cap = [] {
    EnvCap c;
    if (const char* v = std::getenv(kIsaEnv); v != nullptr) {
      c.set = true;
      c.raw = v;
      c.valid = ParseIsaLevel(c.raw, &c.level);
      if (!c.valid) c.level = IsaLevel::kAvx512;
    }
    return c;
  }();
  return cap;
}

std::atomic<int>& CapStorage() {
  static std::atomic<int> cap{static_cast<int>(GetEnvCap().level)};
  return cap;
}

}  // namespace

absl::string_view IsaLevelName(IsaLevel level) {
  switch (level) {
    case IsaLevel::kScalar:
      return "scalar";
    case IsaLevel::kAvx2:
      return "avx2";
    case IsaLevel::kAvx512:
      return "avx512";
  }
  return "unknown";
}

bool ParseIsaLevel(absl::string_view name, IsaLevel* level) {
  for (IsaLevel l : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512}) {
    if (name == IsaLevelName(l)) {
      *level = l;
      return true;
    }
  }
  return false;
}

const CpuFeatures& GetCpuFeatures() {
  static const CpuFeatures features = Detect();
  return features;
}

IsaLevel EffectiveIsaLevel() {
  const int cap = CapStorage().load(std::memory_order_relaxed);
  return static_cast<IsaLevel>(
      std::min(cap, static_cast<int>(GetCpuFeatures().max_level)));
}

bool EffectiveAvx512Vnni() {
  return EffectiveIsaLevel() == IsaLevel::kAvx512 &&
         GetCpuFeatures().avx512_vnni;
}

IsaLevel SetIsaLevelCap(IsaLevel cap) {
  CapStorage().store(static_cast<int>(cap), std::memory_order_relaxed);
  return EffectiveIsaLevel();
}

std::string CpuModelName() {
  const CpuFeatures& f = GetCpuFeatures();
  if (f.vendor.empty()) return "unknown CPU";
  std::string s = absl::StrFormat("%s family %d model %d stepping %d", f.vendor,
                                  f.family, f.model, f.stepping);
  if (!f.brand.empty()) absl::StrAppend(&s, " (", f.brand, ")");
  return s;
}

std::string CpuFeaturesSummary() {
  const CpuFeatures& f = GetCpuFeatures();
  std::string s = "cpu:";
  auto add = [&s](bool on, absl::string_view name) {
    if (on) absl::StrAppend(&s, " ", name);
  };
  add(f.avx2, "avx2");
  add(f.fma, "fma");
  add(f.f16c, "f16c");
  if (f.avx512f) {
    absl::StrAppend(&s, " avx512f");
    if (f.avx512bw) absl::StrAppend(&s, "/bw");
    if (f.avx512vl) absl::StrAppend(&s, "/vl");
    if (f.avx512dq) absl::StrAppend(&s, "/dq");
  }
  add(f.avx512_vnni, "avx512_vnni");
  add(f.avx_vnni, "avx_vnni");
  add(f.avx512_bf16, "avx512_bf16");
  if (f.amx_tile) {
    absl::StrAppend(&s, " amx(tile", f.amx_int8 ? " int8" : "",
                    f.amx_bf16 ? " bf16" : "", ")");
  }
  if (s == "cpu:") absl::StrAppend(&s, " baseline");
  const EnvCap& env = GetEnvCap();
  absl::StrAppend(&s, "; kernels: ", IsaLevelName(EffectiveIsaLevel()));
  if (EffectiveIsaLevel() == IsaLevel::kAvx512) {
    absl::StrAppend(&s,
                    EffectiveAvx512Vnni() ? " (int8: vnni)" : " (int8: avx2)");
  }
  if (!env.set) {
    absl::StrAppend(&s, " (", kIsaEnv, " unset)");
  } else if (env.valid) {
    absl::StrAppend(&s, " (", kIsaEnv, "=", env.raw, ")");
  } else {
    absl::StrAppend(&s, " (", kIsaEnv, "='", env.raw,
                    "' not understood, ignored; use scalar|avx2|avx512)");
  }
  return s;
}

}  // namespace paceline::engine::cpu
