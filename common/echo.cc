#include "common/echo.h"

#include "absl/strings/str_cat.h"

namespace paceline {

std::string Echo(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t end = max_bytes;
  // Back off continuation bytes (10xxxxxx) so a sequence is never cut.
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) {
    --end;
  }
  return absl::StrCat(text.substr(0, end), "... (", text.size(), " bytes)");
}

}  // namespace paceline
