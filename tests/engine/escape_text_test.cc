// EscapeText / IsPrintableUtf8 / Utf8SequenceLength: what reaches a message or a log line of
// text that came from a client or a file.
#include "engine/escape_text.h"

#include <string>

#include "gtest/gtest.h"

namespace fuserank::engine {
namespace {

TEST(EscapeTextTest, KeepsPrintableTextAndValidUtf8) {
  EXPECT_EQ(EscapeText("user_id 42"), "user_id 42");
  EXPECT_EQ(EscapeText("caf\xc3\xa9 \xf0\x9f\x98\x80"), "caf\xc3\xa9 \xf0\x9f\x98\x80");
  EXPECT_EQ(EscapeText(""), "");
}

TEST(EscapeTextTest, EscapesControlCharactersSoNoLineCanBeForged) {
  EXPECT_EQ(EscapeText("a\nb\r\tc\\d"), "a\\nb\\r\\tc\\\\d");
  EXPECT_EQ(EscapeText(std::string("x\0y\x1b[31m\x7f", 9)), "x\\x00y\\x1b[31m\\x7f");
  EXPECT_EQ(EscapeText("\xc2\x85"), "\\xc2\\x85");  // U+0085 NEL, a C1 control
}

TEST(EscapeTextTest, EscapesBytesThatAreNoValidUtf8) {
  EXPECT_EQ(EscapeText("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(EscapeText("\xc3"), "\\xc3");                             // truncated sequence
  EXPECT_EQ(EscapeText("\xc0\xaf"), "\\xc0\\xaf");                    // overlong '/'
  EXPECT_EQ(EscapeText("\xed\xa0\x80"), "\\xed\\xa0\\x80");           // a surrogate
  EXPECT_EQ(EscapeText("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
}

TEST(EscapeTextTest, CutsOnACharacterBoundary) {
  EXPECT_EQ(EscapeText("abcdef", 3), "abc...");
  // "é" is two bytes: a cut at 2 of "aé" keeps "a" only, never half a character.
  EXPECT_EQ(EscapeText("a\xc3\xa9", 2), "a...");
  EXPECT_EQ(EscapeText("a\xc3\xa9", 3), "a\xc3\xa9");
  EXPECT_EQ(EscapeText("ab", 2), "ab");
}

TEST(EscapeTextTest, IsPrintableUtf8) {
  EXPECT_TRUE(IsPrintableUtf8("user_id \xc3\xa9 \\"));
  EXPECT_FALSE(IsPrintableUtf8("a\nb"));
  EXPECT_FALSE(IsPrintableUtf8("\xff"));
  EXPECT_FALSE(IsPrintableUtf8("\xc2\x9f"));
  EXPECT_EQ(Utf8SequenceLength("\xe2\x82\xac"), 3u);
  EXPECT_EQ(Utf8SequenceLength("\xe2\x82"), 0u);
}

}  // namespace
}  // namespace fuserank::engine
