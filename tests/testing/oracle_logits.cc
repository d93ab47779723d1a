#include "tests/testing/oracle_logits.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/forward_batch.h"
#include "gtest/gtest.h"
#include "kvpager/kv_pager.h"
#include "tests/testing/build_paths.h"

namespace paceline::testing {
namespace {

using Json = nlohmann::json;

double LogSumExp(const double* begin, const double* end) {
  const double top = *std::max_element(begin, end);
  double s = 0;
  for (const double* it = begin; it != end; ++it) s += std::exp(*it - top);
  return top + std::log(s);
}

// Where a line's K/V live: blocks 0, 1, 2, ... of the pool, or, for an
// engine with several KV groups (Engine::kv_group_windows), a lease of a
// pager over the engine's pool and groups, covered chunk by chunk and
// marked computed after each, so that windowed groups give their blocks
// back and take them again for later positions as the server's would:
// attention must never read a block given back.
struct LineKv {
  std::vector<int32_t> blocks;
  std::unique_ptr<kvpager::KvPager> pager;
  kvpager::BlockLease lease;
};

// Runs tokens [begin, end) of `tokens` at their positions, in steps of at
// most the engine's step size; the last step wants the logits of `end - 1`.
absl::Status RunChunk(engine::Engine& engine,
                      const std::vector<int32_t>& tokens, int32_t begin,
                      int32_t end, LineKv& kv, absl::Span<float> logits) {
  engine::ForwardBatch batch;
  batch.sequences.resize(1);
  engine::SequenceSlice& slice = batch.sequences[0];
  slice.block_table = kv.blocks;
  // A hybrid model's state: slot 0, zeroed by the engine at position 0.
  slice.state_slot = engine.num_state_slots() > 0 ? 0 : -1;
  while (begin < end) {
    const int32_t count = std::min(end - begin, engine.max_tokens_per_step());
    batch.tokens.assign(tokens.begin() + begin, tokens.begin() + begin + count);
    slice.token_count = count;
    slice.position_begin = begin;
    slice.num_logits = begin + count == end ? 1 : 0;
    if (kv.pager != nullptr) {
      RETURN_IF_ERROR(kv.pager->Cover(&kv.lease, begin + count));
      slice.block_table = kv.lease.block_ids();
      slice.group_tables = kv.lease.group_tables();
    }
    RETURN_IF_ERROR(engine.Forward(
        batch, slice.num_logits > 0 ? logits : absl::Span<float>()));
    if (kv.pager != nullptr) {
      RETURN_IF_ERROR(kv.pager->MarkComputed(&kv.lease, begin + count,
                                             /*cache=*/false));
    }
    begin += count;
  }
  return absl::OkStatus();
}

// One reference line: the prompt, then the greedy tokens.
absl::Status RunLine(engine::Engine& engine, const Json& line,
                     const OracleRunOptions& options, OracleMeasure* m) {
  std::vector<int32_t> tokens = line["prompt"].get<std::vector<int32_t>>();
  const int32_t n_prompt = static_cast<int32_t>(tokens.size());
  std::vector<int32_t> greedy = line["greedy"].get<std::vector<int32_t>>();
  if (static_cast<int64_t>(greedy.size()) > options.max_greedy_tokens) {
    greedy.resize(options.max_greedy_tokens);
  }
  tokens.insert(tokens.end(), greedy.begin(), greedy.end());
  std::vector<int32_t> stored;
  for (const auto& [key, value] : line["logits"].items()) {
    stored.push_back(std::stoi(key));
  }
  std::sort(stored.begin(), stored.end());
  LineKv kv;
  if (engine.kv_group_windows().size() > 1) {
    ASSIGN_OR_RETURN(kv.pager, kvpager::KvPager::Create(
                                   engine.num_blocks(), engine.block_size(),
                                   engine.kv_group_windows()));
    ASSIGN_OR_RETURN(kv.lease, kv.pager->Allocate(tokens, "oracle",
                                                  /*first_step=*/0));
  } else {
    kv.blocks.resize((tokens.size() + engine.block_size() - 1) /
                     engine.block_size());
    std::iota(kv.blocks.begin(), kv.blocks.end(), 0);
  }
  if (static_cast<int64_t>(kv.blocks.size()) > engine.num_blocks()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the engine has ", engine.num_blocks(), " blocks; ",
                     tokens.size(), " positions need ", kv.blocks.size()));
  }
  std::vector<float> logits(engine.config().n_vocab);
  int32_t done = 0;
  for (int32_t p : stored) {
    if (p < done || p >= n_prompt) {
      return absl::InvalidArgumentError(absl::StrCat("stored position ", p));
    }
    RETURN_IF_ERROR(
        RunChunk(engine, tokens, done, p + 1, kv, absl::MakeSpan(logits)));
    CompareOracleLogits(logits, line["logits"][std::to_string(p)], m);
    if (options.keep_rows) m->rows.push_back(logits);
    done = p + 1;
  }
  if (done != n_prompt) {
    return absl::InvalidArgumentError("the last prompt position is not stored");
  }
  // Teacher-forced: the logits after each of llama.cpp's greedy tokens.
  const Json& greedy_logits = line["greedy_logits"];
  for (size_t i = 0; i < greedy.size(); ++i) {
    const int32_t p = n_prompt + static_cast<int32_t>(i);
    RETURN_IF_ERROR(
        RunChunk(engine, tokens, p, p + 1, kv, absl::MakeSpan(logits)));
    CompareOracleLogits(logits, greedy_logits[i], m);
    if (options.keep_rows) m->rows.push_back(logits);
  }
  return absl::OkStatus();
}

}  // namespace

std::filesystem::path OracleDir() {
  return std::filesystem::path(SharedDir()) / "oracle";
}

std::filesystem::path OracleNextDir() {
  return std::filesystem::path(SharedDir()) / "oracle-next";
}

std::vector<std::filesystem::path> OracleModelFiles() {
  std::vector<std::filesystem::path> files;
  const std::filesystem::path dir = OracleDir() / "models";
  if (!std::filesystem::is_directory(dir)) return files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".gguf") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

bool OracleIsQuantized(const std::string& name) {
  return !absl::EndsWith(name, "f32") && !absl::EndsWith(name, "f16");
}

double OracleTolerance(const std::string& name) {
  if (OracleIsQuantized(name)) return 0.08;
  const bool f16_gelu_or_cache =
      absl::StartsWith(name, "gemma3") || absl::StartsWith(name, "gpt-oss");
  return f16_gelu_or_cache ? 0.01 : 0.002;
}

void CompareOracleLogits(absl::Span<const float> ours, const Json& ref,
                         OracleMeasure* m) {
  const size_t n = ref.size();
  ASSERT_EQ(ours.size(), n);
  ASSERT_GE(n, 20u);
  std::vector<double> r(n), o(ours.begin(), ours.end());
  for (size_t i = 0; i < n; ++i) r[i] = ref[i].get<double>();
  const double mean = std::accumulate(r.begin(), r.end(), 0.0) / n;
  double var = 0;
  for (double v : r) var += (v - mean) * (v - mean);
  const double sd = std::sqrt(var / static_cast<double>(n));
  const double lse_ref = LogSumExp(r.data(), r.data() + n);
  const double lse_ours = LogSumExp(o.data(), o.data() + n);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + 20, order.end(),
                    [&](size_t a, size_t b) { return r[a] > r[b]; });
  double worst = 0;
  for (int k = 0; k < 20; ++k) {
    const size_t t = order[k];
    worst = std::max(worst, std::abs((o[t] - lse_ours) - (r[t] - lse_ref)));
  }
  m->max_rel = std::max(m->max_rel, worst / sd);
  for (const float v : ours) {  // FNV-1a over the rows' bits
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    m->logits_hash = (m->logits_hash ^ bits) * 1099511628211ull;
  }
  ++m->positions;
  if (r[order[0]] - r[order[1]] > 0.05) {
    ++m->argmax_checked;
    const size_t ours_top = static_cast<size_t>(
        std::max_element(ours.begin(), ours.end()) - ours.begin());
    if (ours_top == order[0]) {
      ++m->argmax_equal;
    } else {
      m->flip_margins.push_back(r[order[0]] - r[order[1]]);
    }
  }
}

absl::Status MeasureOracleFile(engine::Engine& engine, const std::string& name,
                               const OracleRunOptions& options,
                               OracleMeasure* m) {
  const std::filesystem::path dir =
      options.ref_dir.empty() ? OracleDir() / "ref" : options.ref_dir;
  const std::filesystem::path path = dir / (name + ".jsonl");
  std::ifstream ref(path);
  if (!ref) return absl::NotFoundError(absl::StrCat("no ", path.string()));
  for (std::string text; std::getline(ref, text);) {
    if (text.empty()) continue;
    const Json line = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (line.is_discarded()) {
      return absl::DataLossError(absl::StrCat(path.string(), ": bad line"));
    }
    if (static_cast<int64_t>(line["prompt"].size()) >
        options.max_prompt_tokens) {
      continue;
    }
    RETURN_IF_ERROR(RunLine(engine, line, options, m));
  }
  return absl::OkStatus();
}

}  // namespace paceline::testing
