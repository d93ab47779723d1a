#include "tools/paceline/json_parse.h"

#include <cstddef>

#include "absl/strings/str_cat.h"

namespace paceline::tools {
namespace {

using Json = nlohmann::ordered_json;

// Records the first syntax error of a SAX parse.
class SyntaxErrorSax final : public nlohmann::json_sax<Json> {
 public:
  const std::string& error() const { return error_; }

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    // "[json.exception.parse_error.101] parse error at line 1, column 5: ..."
    const std::string what = ex.what();
    const size_t tag_end = what.find("] ");
    error_ = tag_end == std::string::npos ? what : what.substr(tag_end + 2);
    return false;
  }

 private:
  std::string error_ = "not JSON";
};

}  // namespace

absl::StatusOr<Json> ParseJson(const std::string& text,
                               absl::string_view where) {
  Json value = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!value.is_discarded()) return value;
  SyntaxErrorSax sax;
  Json::sax_parse(text, &sax);
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", sax.error()));
}

}  // namespace paceline::tools
