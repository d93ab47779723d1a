#include "engine/tokenizer/detokenizer.h"

#include "absl/strings/string_view.h"
#include "engine/tokenizer/unicode.h"

namespace paceline::engine {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer* tokenizer)
    : IncrementalDetokenizer(tokenizer, Options()) {}

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer* tokenizer,
                                               Options options)
    : tokenizer_(tokenizer), options_(options) {}

std::string IncrementalDetokenizer::Push(int32_t id) {
  absl::string_view piece =
      options_.control_token_text && tokenizer_->IsControl(id)
          ? tokenizer_->TokenText(id)
          : tokenizer_->TokenBytes(id);
  if (first_token_) {
    first_token_ = false;
    if (options_.strip_leading_space && !piece.empty() && piece[0] == ' ') {
      piece.remove_prefix(1);
    }
  }
  pending_.append(piece.data(), piece.size());

  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    const Utf8Scan scan = ScanUtf8(absl::string_view(pending_).substr(i));
    if (scan.kind == Utf8Scan::kIncomplete) break;  // wait for more bytes
    if (scan.kind == Utf8Scan::kValid) {
      out.append(pending_, i, scan.length);
    } else {
      AppendUtf8(kReplacementCodepoint, &out);
    }
    i += scan.length;
  }
  pending_.erase(0, i);
  return out;
}

std::string IncrementalDetokenizer::Flush() {
  std::string out;
  if (!pending_.empty()) AppendUtf8(kReplacementCodepoint, &out);
  pending_.clear();
  first_token_ = true;
  return out;
}

}  // namespace paceline::engine
