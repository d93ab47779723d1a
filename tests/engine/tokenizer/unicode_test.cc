#include "engine/tokenizer/unicode.h"

#include <string>
#include <vector>

#include "engine/tokenizer/unicode_extra_data.h"
#include "gtest/gtest.h"

namespace paceline::engine {
namespace {

TEST(UnicodeTest, DecodesValidUtf8) {
  EXPECT_EQ(DecodeUtf8Lenient("a\xC3\xA9\xE4\xBD\xA0\xF0\x9F\xA6\x99"),
            (std::vector<uint32_t>{'a', 0xE9, 0x4F60, 0x1F999}));
  EXPECT_TRUE(DecodeUtf8Lenient("").empty());
}

TEST(UnicodeTest, InvalidBytesBecomeReplacementOneByteAtATime) {
  const uint32_t r = kReplacementCodepoint;
  // A lone continuation byte, a bad lead byte, a truncated sequence (its
  // continuation bytes then count one by one), a broken continuation.
  EXPECT_EQ(DecodeUtf8Lenient("\x80"), (std::vector<uint32_t>{r}));
  EXPECT_EQ(DecodeUtf8Lenient("\xFF"
                              "a"),
            (std::vector<uint32_t>{r, 'a'}));
  EXPECT_EQ(DecodeUtf8Lenient("\xE4\xBD"), (std::vector<uint32_t>{r, r}));
  EXPECT_EQ(DecodeUtf8Lenient("\xE4"
                              "a\xA0"),
            (std::vector<uint32_t>{r, 'a', r}));
  // Above U+10FFFF.
  EXPECT_EQ(DecodeUtf8Lenient("\xF5\x80\x80\x80"),
            (std::vector<uint32_t>{r, r, r, r}));
}

TEST(UnicodeTest, LenientDecodeAcceptsWhatLlamaCppAccepts) {
  // Overlong forms and surrogates decode to their value, as in llama.cpp.
  EXPECT_EQ(DecodeUtf8Lenient("\xC0\x80"), (std::vector<uint32_t>{0}));
  EXPECT_EQ(DecodeUtf8Lenient("\xED\xA0\x80"), (std::vector<uint32_t>{0xD800}));
}

TEST(UnicodeTest, DecodeAdvancesOffset) {
  const std::string text = "\xC3\xA9z";
  size_t offset = 0;
  EXPECT_EQ(DecodeUtf8Lenient(text, &offset), 0xE9u);
  EXPECT_EQ(offset, 2u);
  EXPECT_EQ(DecodeUtf8Lenient(text, &offset), uint32_t{'z'});
  EXPECT_EQ(offset, 3u);
}

TEST(UnicodeTest, EncodesUtf8) {
  EXPECT_EQ(EncodeUtf8('A'), "A");
  EXPECT_EQ(EncodeUtf8(0xE9), "\xC3\xA9");
  EXPECT_EQ(EncodeUtf8(0x2581), "\xE2\x96\x81");
  EXPECT_EQ(EncodeUtf8(0x1F999), "\xF0\x9F\xA6\x99");
  EXPECT_EQ(EncodeUtf8(0x110000), "\xEF\xBF\xBD");
  for (uint32_t cpt :
       {0u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xFFFFu, 0x10000u, 0x10FFFFu}) {
    EXPECT_EQ(DecodeUtf8Lenient(EncodeUtf8(cpt)), (std::vector<uint32_t>{cpt}))
        << cpt;
  }
}

TEST(UnicodeTest, LeadByteLengths) {
  EXPECT_EQ(Utf8LengthFromLeadByte('a'), 1u);
  EXPECT_EQ(Utf8LengthFromLeadByte(0x80), 1u);  // continuation: as llama.cpp
  EXPECT_EQ(Utf8LengthFromLeadByte(0xC3), 2u);
  EXPECT_EQ(Utf8LengthFromLeadByte(0xE4), 3u);
  EXPECT_EQ(Utf8LengthFromLeadByte(0xF0), 4u);
  EXPECT_EQ(Utf8LengthFromLeadByte(0xFF), 4u);
}

TEST(UnicodeTest, CategoryFlags) {
  EXPECT_TRUE(GetCodepointFlags('A').is_letter());
  EXPECT_TRUE(GetCodepointFlags(0xE9).is_letter());    // é
  EXPECT_TRUE(GetCodepointFlags(0x4F60).is_letter());  // 你 (Lo)
  EXPECT_TRUE(GetCodepointFlags(0x0439).is_letter());  // й
  EXPECT_TRUE(GetCodepointFlags('7').is_number());
  EXPECT_TRUE(GetCodepointFlags(0xBD).is_number());  // ½ (No)
  EXPECT_TRUE(GetCodepointFlags(0x0301).is_mark());  // combining acute
  EXPECT_TRUE(GetCodepointFlags(0x17B6).is_mark());  // Khmer vowel sign
  EXPECT_TRUE(GetCodepointFlags('!').is_punctuation());
  EXPECT_TRUE(GetCodepointFlags('_').is_punctuation());
  EXPECT_TRUE(GetCodepointFlags(0x3002).is_punctuation());  // 。
  EXPECT_TRUE(GetCodepointFlags('$').is_symbol());
  EXPECT_TRUE(GetCodepointFlags('~').is_symbol());
  EXPECT_TRUE(GetCodepointFlags('`').is_symbol());
  EXPECT_TRUE(GetCodepointFlags(0x1F999).is_symbol());  // 🦙 (So)
  EXPECT_TRUE(GetCodepointFlags(0x00).is_control());
  EXPECT_TRUE(GetCodepointFlags(0x200D).is_control());  // ZWJ (Cf)
  EXPECT_TRUE(GetCodepointFlags(0xE000).is_control());  // private use
  EXPECT_TRUE(GetCodepointFlags(0x0378).is_undefined());
  EXPECT_TRUE(GetCodepointFlags(0x110000).is_undefined());
  EXPECT_TRUE(GetCodepointFlags(' ').is_separator());
}

TEST(UnicodeTest, ExactlyOneCategoryPerCodepoint) {
  for (uint32_t cpt = 0; cpt <= 0x10FFFF; cpt += 7) {
    const uint16_t category =
        GetCodepointFlags(cpt).bits & CodepointFlags::kCategoryMask;
    ASSERT_NE(category, 0) << cpt;
    ASSERT_EQ(category & (category - 1), 0) << cpt;
  }
}

TEST(UnicodeTest, WhitespaceIsTheWhiteSpaceProperty) {
  std::vector<uint32_t> whitespace;
  for (uint32_t cpt = 0; cpt <= 0x10FFFF; ++cpt) {
    if (GetCodepointFlags(cpt).is_whitespace()) whitespace.push_back(cpt);
  }
  EXPECT_EQ(whitespace,
            (std::vector<uint32_t>{0x09,   0x0A,   0x0B,   0x0C,   0x0D,
                                   0x20,   0x85,   0xA0,   0x1680, 0x2000,
                                   0x2001, 0x2002, 0x2003, 0x2004, 0x2005,
                                   0x2006, 0x2007, 0x2008, 0x2009, 0x200A,
                                   0x2028, 0x2029, 0x202F, 0x205F, 0x3000}));
  // Whitespace keeps its category: '\n' is a control, U+3000 a separator.
  EXPECT_TRUE(GetCodepointFlags('\n').is_control());
  EXPECT_TRUE(GetCodepointFlags(0x3000).is_separator());
  EXPECT_FALSE(GetCodepointFlags(0x1C).is_whitespace());
}

TEST(UnicodeTest, DataVersionIsRecorded) {
  EXPECT_FALSE(UnicodeDataVersion().empty());
}

TEST(UnicodeTest, LetterCase) {
  EXPECT_EQ(GetLetterCase('A'), LetterCase::kUpper);
  EXPECT_EQ(GetLetterCase('z'), LetterCase::kLower);
  EXPECT_EQ(GetLetterCase('1'), LetterCase::kNone);
  EXPECT_EQ(GetLetterCase(0x00C9), LetterCase::kUpper);   // É Lu
  EXPECT_EQ(GetLetterCase(0x00DF), LetterCase::kLower);   // ß Ll
  EXPECT_EQ(GetLetterCase(0x01C5), LetterCase::kUpper);   // ǅ Lt
  EXPECT_EQ(GetLetterCase(0x02B0), LetterCase::kNone);    // ʰ Lm
  EXPECT_EQ(GetLetterCase(0x4E00), LetterCase::kNone);    // 一 Lo
  EXPECT_EQ(GetLetterCase(0x0416), LetterCase::kUpper);   // Ж
  EXPECT_EQ(GetLetterCase(0x0436), LetterCase::kLower);   // ж
  EXPECT_EQ(GetLetterCase(0x1D400), LetterCase::kUpper);  // 𝐀 Lu
  EXPECT_EQ(GetLetterCase(0x110000), LetterCase::kNone);
}

TEST(UnicodeTest, ExtraTablesShareTheVersion) {
  EXPECT_EQ(UnicodeDataVersion(),
            absl::string_view(unicode_internal::kUnicodeExtraVersion));
}

TEST(UnicodeTest, ByteToUnicodeTable) {
  EXPECT_EQ(ByteToUnicode('!'), uint32_t{'!'});
  EXPECT_EQ(ByteToUnicode('~'), uint32_t{'~'});
  EXPECT_EQ(ByteToUnicode(0xE9), 0xE9u);
  EXPECT_EQ(ByteToUnicode(0x00), 0x100u);
  EXPECT_EQ(ByteToUnicode('\n'), 0x10Au);  // Ċ
  EXPECT_EQ(ByteToUnicode(' '), 0x120u);   // Ġ
  EXPECT_EQ(ByteToUnicode(0x7F), 0x121u);
  EXPECT_EQ(ByteToUnicode(0xAD), 0x143u);  // the last one
  for (int b = 0; b < 256; ++b) {
    EXPECT_EQ(UnicodeToByte(ByteToUnicode(static_cast<uint8_t>(b))), b);
  }
  EXPECT_EQ(UnicodeToByte(' '), -1);
  EXPECT_EQ(UnicodeToByte(0x144), -1);
  EXPECT_EQ(UnicodeToByte(0x4F60), -1);
}

TEST(UnicodeTest, StrictScan) {
  Utf8Scan s = ScanUtf8("\xE4\xBD\xA0!");
  EXPECT_EQ(s.kind, Utf8Scan::kValid);
  EXPECT_EQ(s.length, 3u);
  EXPECT_EQ(s.codepoint, 0x4F60u);

  s = ScanUtf8("\xF0\x9F\xA6");
  EXPECT_EQ(s.kind, Utf8Scan::kIncomplete);
  EXPECT_EQ(s.length, 3u);

  s = ScanUtf8(
      "\xE4"
      "a");
  EXPECT_EQ(s.kind, Utf8Scan::kInvalid);
  EXPECT_EQ(s.length, 1u);

  s = ScanUtf8(
      "\xF0\x9F"
      "a");  // maximal subpart: the two valid bytes
  EXPECT_EQ(s.kind, Utf8Scan::kInvalid);
  EXPECT_EQ(s.length, 2u);

  for (const char* bad : {"\xC0\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80",
                          "\xE0\x80\x80", "\x80", "\xFF"}) {
    EXPECT_EQ(ScanUtf8(bad).kind, Utf8Scan::kInvalid) << bad;
  }
}

TEST(UnicodeTest, Sanitize) {
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(SanitizeUtf8("ok \xC3\xA9"), "ok \xC3\xA9");
  EXPECT_EQ(SanitizeUtf8("a\xFF"
                         "b"),
            "a" + r + "b");
  EXPECT_EQ(SanitizeUtf8("\xC0\x80"), r + r);         // overlong: two subparts
  EXPECT_EQ(SanitizeUtf8("x\xF0\x9F\xA6"), "x" + r);  // dangling tail
}

}  // namespace
}  // namespace paceline::engine
