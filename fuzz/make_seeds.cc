// Writes the fuzzer's seed corpus: a few small, valid GGUF files that between
// them reach every metadata value type, nested arrays, both versions, a
// custom alignment, quantized tensor types and each supported architecture.
//
//   cmake --build build --target gguf_fuzz_seeds
//   build/fuzz/gguf_fuzz_seeds fuzz/seeds
//
// Seeds are kept small (a few KB): libFuzzer mutates small inputs faster and
// its default -max_len follows the largest seed.

#include <cstdio>
#include <fstream>
#include <string>

#include "engine/gguf/ggml_type.h"
#include "tests/testing/gguf_builder.h"

namespace {

namespace gt = ::paceline::testing;
using ::paceline::engine::GgmlType;

bool Write(const std::string& dir, const std::string& name,
           const std::string& bytes) {
  const std::string path = dir + "/" + name;
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  if (!out) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    return false;
  }
  std::printf("%s: %zu bytes\n", path.c_str(), bytes.size());
  return true;
}

std::string TinyModel(const gt::TinyModelSpec& spec, uint32_t version,
                      void (*extra)(gt::GgufBuilder&)) {
  gt::GgufBuilder b;
  b.SetVersion(version);
  if (extra != nullptr) extra(b);
  gt::AddTinyModel(b, spec);
  return b.Build();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  bool ok = true;

  const gt::TinyModelSpec small{.n_layers = 1,
                                .n_embd = 8,
                                .n_heads = 2,
                                .n_kv_heads = 1,
                                .n_ff = 8,
                                .n_vocab = 4,
                                .context_length = 16};

  gt::TinyModelSpec llama = small;
  ok &= Write(dir, "llama_v3.gguf", TinyModel(llama, 3, [](gt::GgufBuilder& b) {
                b.Add("general.name", gt::Str("seed llama"))
                    .Add("llama.rope.freq_base", gt::F32(10000.0f))
                    .Add("llama.rope.scaling.type", gt::Str("linear"))
                    .Add("llama.rope.scaling.factor", gt::F32(2.0f));
              }));

  gt::TinyModelSpec qwen2 = small;
  qwen2.arch = "qwen2";
  qwen2.qkv_bias = true;
  ok &= Write(
      dir, "qwen2_align8.gguf", TinyModel(qwen2, 3, [](gt::GgufBuilder& b) {
        b.SetAlignment(8)
            .Add("qwen2.rope.scaling.type", gt::Str("yarn"))
            .Add("qwen2.rope.scaling.factor", gt::F32(4.0f))
            .Add("qwen2.rope.scaling.original_context_length", gt::U32(8));
      }));

  gt::TinyModelSpec qwen3 = small;
  qwen3.arch = "qwen3";
  qwen3.head_dim = 8;
  qwen3.qk_norm = true;
  qwen3.tied_output = true;
  qwen3.write_tokens = false;
  ok &= Write(dir, "qwen3_v2_tied.gguf", TinyModel(qwen3, 2, nullptr));

  using gt::gguf_type::kArray;
  ok &= Write(dir, "all_types.gguf",
              gt::GgufBuilder()
                  .Add("u8", gt::U8(1))
                  .Add("i8", gt::I8(-1))
                  .Add("u16", gt::U16(2))
                  .Add("i16", gt::I16(-2))
                  .Add("u32", gt::U32(3))
                  .Add("i32", gt::I32(-3))
                  .Add("f32", gt::F32(0.5f))
                  .Add("bool", gt::Bool(true))
                  .Add("str", gt::Str("s"))
                  .Add("u64", gt::U64(4))
                  .Add("i64", gt::I64(-4))
                  .Add("f64", gt::F64(0.25))
                  .Add("strs", gt::StrArray({"a", "b"}))
                  .Add("nested", gt::Array(kArray, {gt::I32Array({1, 2}),
                                                    gt::F32Array({1.0f})}))
                  .Build());

  ok &=
      Write(dir, "quantized.gguf",
            gt::GgufBuilder()
                .Add("general.architecture", gt::Str("llama"))
                .AddTensor("q8", GgmlType::kQ8_0, {32, 2},
                           std::string(2 * 34, '\x01'))
                .AddTensor("q4", GgmlType::kQ4_0, {64}, std::string(36, 2))
                .AddTensor("f16", GgmlType::kF16, {3, 1, 2}, std::string(12, 3))
                .AddTensor("bf16", GgmlType::kBF16, {4}, std::string(8, 4))
                .Build());
  return ok ? 0 : 1;
}
