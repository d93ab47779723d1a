// libFuzzer target for the GGUF reader and the model config on top of it.
//
// Any input must either be rejected with a Status or yield a GgufFile whose
// every view lies inside the input; everything reachable from a parsed file
// (getters, ModelConfigFromGguf, CheckModelTensors) must not crash either.
// Sanitizers catch memory errors; the checks below catch views that point
// outside the input, which ASan cannot see when they land in other memory.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "engine/gguf/gguf_file.h"
#include "engine/model/model_config.h"

namespace {

using ::paceline::engine::GgufFile;
using ::paceline::engine::GgufTensorInfo;
using ::paceline::engine::GgufValue;
using ::paceline::engine::GgufValueType;

struct Input {
  const uint8_t* begin;
  const uint8_t* end;
  bool Contains(const void* p, size_t n) const {
    const auto* q = static_cast<const uint8_t*>(p);
    return q >= begin && q <= end && n <= static_cast<size_t>(end - q);
  }
};

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "gguf_fuzzer invariant violated: %s\n", what);
    std::abort();
  }
}

// Visits a value tree, checking that every string views the input.
void WalkValue(const GgufValue& v, const Input& in, int depth) {
  Check(depth <= 16, "value nesting deeper than the reader allows");
  if (v.type == GgufValueType::kString) {
    Check(v.s.empty() || in.Contains(v.s.data(), v.s.size()),
          "string outside the input");
  }
  for (const GgufValue& e : v.elements) {
    Check(e.type == v.element_type, "array element of another type");
    WalkValue(e, in, depth + 1);
  }
  (void)::paceline::engine::GgufValueTypeName(v.type);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parsed = GgufFile::FromBuffer(data, size);
  if (!parsed.ok()) return 0;
  const GgufFile& file = **parsed;
  const Input in{data, data + size};

  Check(
      file.alignment() != 0 && (file.alignment() & (file.alignment() - 1)) == 0,
      "alignment not a power of two");
  for (const auto& [key, value] : file.metadata()) {
    WalkValue(value, in, 0);
    Check(file.Find(key) == &value, "Find does not return the entry");
    // Every getter on every key: each either converts or says why not.
    (void)file.GetString(key);
    (void)file.GetUint(key);
    (void)file.GetInt(key);
    (void)file.GetFloat(key);
    (void)file.GetBool(key);
    (void)file.GetStringArray(key);
    (void)file.GetFloatArray(key);
    (void)file.GetIntArray(key);
  }

  uint64_t total_bytes = 0;
  for (const GgufTensorInfo& t : file.tensors()) {
    Check(file.FindTensor(t.name) == &t, "FindTensor does not return it");
    Check(!t.shape.empty() && t.shape.size() <= 4, "bad n_dims accepted");
    Check(t.num_elements() > 0, "empty tensor accepted");
    Check(t.size_bytes > 0, "tensor without bytes");
    Check(in.Contains(t.data, t.size_bytes), "tensor data outside the input");
    Check(t.offset % file.alignment() == 0, "misaligned tensor accepted");
    // Touch both ends so ASan checks the bounds too.
    volatile uint8_t sink = t.data[0];
    sink = t.data[t.size_bytes - 1];
    (void)sink;
    total_bytes += t.size_bytes;
  }
  // Tensors do not overlap, so together they fit in the input.
  Check(total_bytes <= size, "tensors overlap");

  auto config = ::paceline::engine::ModelConfigFromGguf(file);
  if (config.ok()) {
    Check(config->n_heads % config->n_kv_heads == 0, "kv heads");
    Check(config->rope_dim <= config->head_dim, "rope dim");
    Check(config->ParameterCount() > 0, "parameter count");
    (void)::paceline::engine::CheckModelTensors(file, *config);
  }
  return 0;
}
