// NFC per UAX #15 on the standard's own examples: composition, singletons,
// exclusions, canonical reordering, blocking, Hangul.

#include "engine/tokenizer/normalizer.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace paceline::engine {
namespace {

using Cpts = std::vector<uint32_t>;

Cpts Nfc(Cpts cpts) {
  NormalizeNfc(&cpts);
  return cpts;
}

TEST(NormalizerTest, ComposesBaseAndMark) {
  EXPECT_EQ(Nfc({'e', 0x0301}), (Cpts{0x00E9}));            // é
  EXPECT_EQ(Nfc({'A', 0x030A}), (Cpts{0x00C5}));            // Å
  EXPECT_EQ(Nfc({'n', 0x0303, 'o'}), (Cpts{0x00F1, 'o'}));  // ño
  EXPECT_EQ(Nfc({'x', 'e', 0x0301, 'y'}), (Cpts{'x', 0x00E9, 'y'}));
}

TEST(NormalizerTest, LeavesComposedAndPlainTextAlone) {
  EXPECT_EQ(Nfc({}), (Cpts{}));
  EXPECT_EQ(Nfc({'a', 'b', 0x00E9, 0x4E00}), (Cpts{'a', 'b', 0x00E9, 0x4E00}));
  // No precomposed form: stays decomposed.
  EXPECT_EQ(Nfc({'q', 0x0301}), (Cpts{'q', 0x0301}));
  // A leading mark has nothing to join.
  EXPECT_EQ(Nfc({0x0301, 'e'}), (Cpts{0x0301, 'e'}));
}

TEST(NormalizerTest, SingletonsAndExclusionsDecompose) {
  EXPECT_EQ(Nfc({0x212B}), (Cpts{0x00C5}));  // ANGSTROM SIGN -> Å
  EXPECT_EQ(Nfc({0x2126}), (Cpts{0x03A9}));  // OHM SIGN -> Ω
  // DEVANAGARI LETTER QA is excluded from composition.
  EXPECT_EQ(Nfc({0x0958}), (Cpts{0x0915, 0x093C}));
}

TEST(NormalizerTest, ReordersMarksThenComposes) {
  // UAX #15: d + dot above + dot below -> ḍ + dot above.
  EXPECT_EQ(Nfc({'d', 0x0307, 0x0323}), (Cpts{0x1E0D, 0x0307}));
  EXPECT_EQ(Nfc({0x1E0B, 0x0323}), (Cpts{0x1E0D, 0x0307}));
  // A second mark of the same class is blocked by the first.
  EXPECT_EQ(Nfc({'a', 0x0301, 0x0301}), (Cpts{0x00E1, 0x0301}));
}

TEST(NormalizerTest, Hangul) {
  EXPECT_EQ(Nfc({0x1100, 0x1161}), (Cpts{0xAC00}));          // 가
  EXPECT_EQ(Nfc({0x1100, 0x1161, 0x11A8}), (Cpts{0xAC01}));  // 각
  EXPECT_EQ(Nfc({0xAC00, 0x11A8}), (Cpts{0xAC01}));
  EXPECT_EQ(Nfc({0xAC01, 0x11A8}), (Cpts{0xAC01, 0x11A8}));  // already LVT
}

}  // namespace
}  // namespace paceline::engine
