#include "engine/model/memory_plan.h"

#include <cctype>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "absl/numeric/int128.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"

namespace paceline::engine {
namespace {

constexpr uint64_t kMaxBytes = std::numeric_limits<uint64_t>::max();

struct NamedDtype {
  absl::string_view name;
  GgmlType type;
  bool weights;  // accepted by ParseWeightsDtype
  bool kv;       // accepted by ParseKvDtype
};

constexpr NamedDtype kDtypes[] = {
    {"f32", GgmlType::kF32, true, true},
    {"f16", GgmlType::kF16, true, true},
    {"bf16", GgmlType::kBF16, true, true},
    {"q8_0", GgmlType::kQ8_0, true, false},
    {"q4_0", GgmlType::kQ4_0, true, false},
};

absl::StatusOr<GgmlType> ParseDtype(absl::string_view name, bool kv) {
  std::string accepted;
  for (const NamedDtype& d : kDtypes) {
    if (!(kv ? d.kv : d.weights)) continue;
    if (d.name == name) return d.type;
    absl::StrAppend(&accepted, accepted.empty() ? "" : ", ", d.name);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown ", kv ? "KV cache" : "weights", " dtype '", name,
                   "' (accepted: ", accepted, ")"));
}

absl::StatusOr<uint64_t> Mul(uint64_t a, uint64_t b, absl::string_view what) {
  uint64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) {
    return absl::OutOfRangeError(
        absl::StrCat(what, " overflows 64 bits (", a, " x ", b, ")"));
  }
  return out;
}

absl::StatusOr<uint64_t> Add(uint64_t a, uint64_t b, absl::string_view what) {
  uint64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) {
    return absl::OutOfRangeError(
        absl::StrCat(what, " overflows 64 bits (", a, " + ", b, ")"));
  }
  return out;
}

// Bytes of `n` elements of `type`, rounding a partial block up.
absl::StatusOr<uint64_t> ElementBytes(GgmlType type, uint64_t n,
                                      absl::string_view what) {
  const GgmlTypeTraits& traits = GetGgmlTypeTraits(type);
  const uint64_t block = static_cast<uint64_t>(traits.block_size);
  const uint64_t blocks = n / block + (n % block != 0 ? 1 : 0);
  return Mul(blocks, static_cast<uint64_t>(traits.type_size), what);
}

absl::Status CheckRequest(const MemoryPlanRequest& request) {
  if (request.weights_type.has_value() ==
      request.weights_file_bytes.has_value()) {
    return absl::InvalidArgumentError(
        "exactly one of weights_type and weights_file_bytes must be set");
  }
  if (request.context <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("context must be positive, got ", request.context));
  }
  if (request.sequences <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sequences must be positive, got ", request.sequences));
  }
  if (GetGgmlTypeTraits(request.kv_type).block_size != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV cache dtype ", DtypeName(request.kv_type),
                     " is block-quantized; use f32, f16 or bf16"));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> KvBytesPerToken(const ModelConfig& config,
                                         GgmlType kv_type) {
  int64_t head_dim = config.head_dim;
  if (head_dim == 0 && config.n_heads > 0) {
    head_dim = config.n_embd / config.n_heads;
  }
  if (config.n_layers <= 0 || config.n_kv_heads <= 0 || head_dim <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model shape needs layers, KV heads and a head size (got ",
                     config.n_layers, " layers, ", config.n_kv_heads,
                     " KV heads, head_dim ", head_dim, ")"));
  }
  constexpr absl::string_view kWhat = "KV bytes per token";
  ASSIGN_OR_RETURN(uint64_t n,
                   Mul(2 * static_cast<uint64_t>(config.n_layers),
                       static_cast<uint64_t>(config.n_kv_heads), kWhat));
  ASSIGN_OR_RETURN(n, Mul(n, static_cast<uint64_t>(head_dim), kWhat));
  return ElementBytes(kv_type, n, kWhat);
}

MemoryFit FitInto(uint64_t memory, const MemoryPlan& plan) {
  MemoryFit fit;
  fit.memory_bytes = memory;
  fit.weights_fit = plan.weights_bytes <= memory;
  fit.fits = plan.total_bytes <= memory;
  if (!fit.weights_fit) {
    fit.weights_shortfall_bytes = plan.weights_bytes - memory;
  } else {
    // KV per token × context cannot overflow: it is at most kv_bytes.
    const uint64_t per_sequence =
        plan.kv_bytes_per_token * static_cast<uint64_t>(plan.context);
    fit.sequences_that_fit =
        static_cast<int64_t>((memory - plan.weights_bytes) / per_sequence);
  }
  if (!fit.fits) fit.shortfall_bytes = plan.total_bytes - memory;
  return fit;
}

}  // namespace

absl::StatusOr<GgmlType> ParseWeightsDtype(absl::string_view name) {
  return ParseDtype(name, /*kv=*/false);
}

absl::StatusOr<GgmlType> ParseKvDtype(absl::string_view name) {
  return ParseDtype(name, /*kv=*/true);
}

std::string DtypeName(GgmlType type) {
  for (const NamedDtype& d : kDtypes) {
    if (d.type == type) return std::string(d.name);
  }
  return absl::AsciiStrToLower(GetGgmlTypeTraits(type).name);
}

absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text) {
  const absl::string_view original = text;
  auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", original, "' is not a byte size: ", why));
  };
  text = absl::StripAsciiWhitespace(text);

  // Mantissa digits (integer and fraction together) and their scale.
  std::string digits;
  int64_t exponent = 0;  // value = digits × 10^exponent
  bool any_digit = false;
  size_t i = 0;
  for (; i < text.size() && absl::ascii_isdigit(text[i]); ++i) {
    digits += text[i];
    any_digit = true;
  }
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && absl::ascii_isdigit(text[i]); ++i) {
      digits += text[i];
      --exponent;
      any_digit = true;
    }
  }
  if (!any_digit) return invalid("expected a number, e.g. 24GiB or 1e9");
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    size_t j = i + 1;
    bool negative = false;
    if (j < text.size() && (text[j] == '+' || text[j] == '-')) {
      negative = text[j] == '-';
      ++j;
    }
    int64_t e = 0;
    const size_t start = j;
    for (; j < text.size() && absl::ascii_isdigit(text[j]); ++j) {
      if (e > 100000) return invalid("exponent too large");
      e = e * 10 + (text[j] - '0');
    }
    if (j == start) return invalid("exponent has no digits");
    exponent += negative ? -e : e;
    i = j;
  }

  struct Unit {
    absl::string_view name;
    uint64_t bytes;
  };
  constexpr Unit kUnits[] = {
      {"", 1},
      {"b", 1},
      {"kb", 1000},
      {"mb", 1000 * 1000},
      {"gb", 1000 * 1000 * 1000},
      {"tb", uint64_t{1000} * 1000 * 1000 * 1000},
      {"kib", uint64_t{1} << 10},
      {"mib", uint64_t{1} << 20},
      {"gib", uint64_t{1} << 30},
      {"tib", uint64_t{1} << 40},
  };
  const std::string unit_name =
      absl::AsciiStrToLower(absl::StripLeadingAsciiWhitespace(text.substr(i)));
  std::optional<uint64_t> unit;
  for (const Unit& u : kUnits) {
    if (u.name == unit_name) unit = u.bytes;
  }
  if (!unit.has_value()) {
    return invalid("unknown unit (use B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)");
  }

  // Drop leading zeros and fractional trailing zeros; at most 20 significant
  // digits (2^64 − 1 has 20) may remain, so digits × unit < 10^20 × 2^40 <
  // 2^107 fits in 128 bits.
  const size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) return 0;
  digits.erase(0, first);
  while (exponent < 0 && digits.back() == '0') {
    digits.pop_back();
    ++exponent;
  }
  if (digits.size() > 20) return invalid("too many significant digits");
  absl::uint128 value = 0;
  for (char c : digits) value = value * 10 + static_cast<uint64_t>(c - '0');
  value *= *unit;
  for (; exponent > 0; --exponent) {
    value *= 10;
    if (value > kMaxBytes) break;
  }
  if (exponent < -38) return 0;  // below one byte: value < 2^107 < 10^38
  for (; exponent < 0; ++exponent) value /= 10;
  if (value > kMaxBytes) {
    return absl::OutOfRangeError(
        absl::StrCat("'", original, "' is more than 2^64 - 1 bytes"));
  }
  return absl::Uint128Low64(value);
}

absl::StatusOr<uint64_t> GgufTensorBytes(const GgufFile& file) {
  uint64_t total = 0;
  for (const GgufTensorInfo& tensor : file.tensors()) {
    ASSIGN_OR_RETURN(total, Add(total, tensor.size_bytes, "tensor bytes"));
  }
  return total;
}

absl::StatusOr<MemoryPlan> PlanMemory(const ModelConfig& config,
                                      const MemoryPlanRequest& request) {
  RETURN_IF_ERROR(CheckRequest(request));
  MemoryPlan plan;
  plan.parameters = config.ParameterCount();
  if (plan.parameters <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model shape has ", plan.parameters, " parameters; expected > 0"));
  }
  if (request.weights_type.has_value()) {
    plan.weights_dtype = DtypeName(*request.weights_type);
    ASSIGN_OR_RETURN(
        plan.weights_bytes,
        ElementBytes(*request.weights_type,
                     static_cast<uint64_t>(plan.parameters), "weight bytes"));
  } else {
    plan.weights_dtype = "file";
    plan.weights_bytes = *request.weights_file_bytes;
  }
  plan.kv_dtype = DtypeName(request.kv_type);
  ASSIGN_OR_RETURN(plan.kv_bytes_per_token,
                   KvBytesPerToken(config, request.kv_type));
  plan.context = request.context;
  plan.sequences = request.sequences;
  ASSIGN_OR_RETURN(uint64_t per_sequence,
                   Mul(plan.kv_bytes_per_token,
                       static_cast<uint64_t>(request.context), "KV bytes"));
  ASSIGN_OR_RETURN(
      plan.kv_bytes,
      Mul(per_sequence, static_cast<uint64_t>(request.sequences), "KV bytes"));
  ASSIGN_OR_RETURN(plan.total_bytes,
                   Add(plan.weights_bytes, plan.kv_bytes, "total bytes"));
  // weights × 1.3 = weights + floor(weights × 3 / 10), without overflowing
  // the intermediate product.
  const uint64_t w = plan.weights_bytes;
  ASSIGN_OR_RETURN(plan.rule_of_thumb_bytes,
                   Add(w, w / 10 * 3 + w % 10 * 3 / 10, "rule-of-thumb bytes"));
  if (request.memory_bytes.has_value()) {
    plan.fit = FitInto(*request.memory_bytes, plan);
  }
  return plan;
}

}  // namespace paceline::engine
