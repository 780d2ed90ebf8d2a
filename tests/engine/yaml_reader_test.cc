// The one YAML reader's rules, on their own: duplicate keys refused, numbers and booleans
// only as plain scalars, unknown keys named with the known ones, integers that do not fit,
// wrong types, anchors and aliases refused, and every problem as "<file>: <key path>:
// <reason>", at most kMaxErrorLines of them.
#include "engine/yaml_reader.h"

#include <optional>
#include <string>
#include <vector>

#include "engine/error_list.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fuserank::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

struct Values {
  int count = 7;
  int64_t bytes = 9;
  bool on = false;
  double share = 0.5;
  std::string name = "x";
  std::vector<int> widths;
};

// Reads `text` as the map {count, bytes, on, share, name, widths} of file "f.yaml", section
// "s"; returns the problems.
std::vector<std::string> Read(const std::string& text, Values* values) {
  ErrorList errors("f.yaml");
  std::optional<YAML::Node> root = LoadYaml(text, &errors);
  if (!root) return errors.lines();
  YamlMap map(*root, "s", &errors);
  map.Int("count", &values->count);
  map.Int64("bytes", &values->bytes);
  map.Bool("on", &values->on);
  map.Double("share", &values->share);
  map.String("name", &values->name);
  map.IntList("widths", &values->widths);
  map.ReportUnknown();
  return errors.lines();
}

TEST(YamlReaderTest, ReadsPlainScalarsAndLeavesAbsentKeysAlone) {
  Values v;
  EXPECT_THAT(Read("{count: 3, on: true, name: \"4\", widths: [1, 2]}", &v), IsEmpty());
  EXPECT_EQ(v.count, 3);
  EXPECT_EQ(v.bytes, 9);
  EXPECT_TRUE(v.on);
  EXPECT_EQ(v.share, 0.5);
  EXPECT_EQ(v.name, "4");  // a quoted number is a string, and a string may be anything
  EXPECT_THAT(v.widths, ElementsAre(1, 2));
}

TEST(YamlReaderTest, RefusesADuplicateKey) {
  Values v;
  EXPECT_THAT(Read("count: 1\ncount: 2\n", &v),
              ElementsAre("f.yaml: s.count: given more than once"));
  EXPECT_EQ(v.count, 1);
}

// Keys are looked up by hash, not compared pairwise: among thousands of keys, the first of
// each is the one read, a repeat is refused once per repeat, and none is lost.
TEST(YamlReaderTest, FindsTheFirstOfEachKeyAmongThousands) {
  std::string text;
  for (int i = 0; i < 5000; ++i) text += "k" + std::to_string(i) + ": " + std::to_string(i) + "\n";
  text += "k4999: 0\nk0: 1\n";
  ErrorList errors("f.yaml");
  std::optional<YAML::Node> root = LoadYaml(text, &errors);
  ASSERT_TRUE(root.has_value());
  YamlMap map(*root, "", &errors);
  EXPECT_THAT(errors.lines(), ElementsAre("f.yaml: k4999: given more than once",
                                          "f.yaml: k0: given more than once"));
  int value = -1;
  EXPECT_TRUE(map.Int("k4999", &value));
  EXPECT_EQ(value, 4999);
  EXPECT_TRUE(map.Int("k0", &value));
  EXPECT_EQ(value, 0);
  EXPECT_FALSE(map.Int("k5000", &value));
  map.Require({"k2500", "k5001"});
  EXPECT_EQ(errors.lines().back(), "f.yaml: k5001: missing");
}

TEST(YamlReaderTest, RefusesQuotedNumbersAndBooleans) {
  Values v;
  EXPECT_THAT(Read("{count: \"3\", bytes: '4', on: \"true\", share: \"0.1\"}", &v),
              ElementsAre("f.yaml: s.count: must be an integer, got the string '3'",
                          "f.yaml: s.bytes: must be an integer, got the string '4'",
                          "f.yaml: s.on: must be true or false, got the string 'true'",
                          "f.yaml: s.share: must be a number, got the string '0.1'"));
  EXPECT_EQ(v.count, 7);
}

TEST(YamlReaderTest, NamesAnUnknownKeyAndTheKnownOnes) {
  Values v;
  EXPECT_THAT(Read("{cuont: 3}", &v),
              ElementsAre("f.yaml: s.cuont: unknown key (known here: count, bytes, on, share, "
                          "name, widths)"));
}

TEST(YamlReaderTest, RefusesAnIntegerThatDoesNotFit) {
  Values v;
  EXPECT_THAT(Read("{count: 3000000000, widths: [1, 3000000000]}", &v),
              ElementsAre("f.yaml: s.count: is out of range, got 3000000000",
                          "f.yaml: s.widths[1]: is out of range, got 3000000000"));
}

TEST(YamlReaderTest, RefusesTheWrongType) {
  Values v;
  EXPECT_THAT(Read("{count: 1.5, name: [a], on: maybe, widths: 4, bytes: {a: 1}}", &v),
              ElementsAre("f.yaml: s.count: must be an integer, got '1.5'",
                          "f.yaml: s.bytes: must be an integer, got a map",
                          "f.yaml: s.on: must be true or false, got 'maybe'",
                          "f.yaml: s.name: must be a string, got a list",
                          "f.yaml: s.widths: must be a list of integers, got '4'"));
}

TEST(YamlReaderTest, EscapesAndCutsQuotedText) {
  Values v;
  const std::vector<std::string> lines = Read("{count: \"a\\tb\", \"k\\x01\": 1}", &v);
  EXPECT_THAT(lines, ElementsAre("f.yaml: s.count: must be an integer, got the string 'a\\tb'",
                                 ::testing::StartsWith("f.yaml: s.k\\x01: unknown key")));
}

TEST(YamlReaderTest, SyntaxErrorNamesLineAndColumn) {
  Values v;
  EXPECT_THAT(
      Read("{count: [1,\n", &v),
      ElementsAre(::testing::ContainsRegex(
          "^f\\.yaml: line [0-9]+, column [0-9]+: YAML syntax error \\(invalid YAML\\): ")));
}

TEST(YamlReaderTest, EnumListsTheChoices) {
  ErrorList errors("f.yaml");
  std::optional<YAML::Node> root = LoadYaml("{mode: fast}", &errors);
  ASSERT_TRUE(root.has_value());
  YamlMap map(*root, "", &errors);
  int mode = 0;
  EXPECT_FALSE(map.Enum("mode", {{"slow", 1}, {"safe", 2}}, &mode));
  EXPECT_THAT(errors.lines(), ElementsAre("f.yaml: mode: must be one of slow|safe, got 'fast'"));
}

TEST(YamlReaderTest, RequireNamesMissingKeys) {
  ErrorList errors;
  std::optional<YAML::Node> root = LoadYaml("{a: 1}", &errors);
  ASSERT_TRUE(root.has_value());
  YamlMap map(*root, "t[0]", &errors);
  map.Require({"a", "b"});
  EXPECT_THAT(errors.lines(), ElementsAre("t[0].b: missing"));
}

TEST(ErrorListTest, JoinsProblemsIntoOneStatus) {
  ErrorList errors("f.yaml");
  EXPECT_TRUE(errors.ToStatus().ok());
  errors.Add("a.b", "must be 1");
  errors.AddLine("tensor 't' is missing");
  EXPECT_EQ(errors.ToStatus().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(errors.ToStatus().message(), "f.yaml: a.b: must be 1\nf.yaml: tensor 't' is missing");
  EXPECT_EQ(errors.ToStatus("; ").message(),
            "f.yaml: a.b: must be 1; f.yaml: tensor 't' is missing");
}

// An alias stands for its anchor's whole node: refused (an anchor alone too), naming where
// the anchor is, before any key is read.
TEST(YamlReaderTest, RefusesAnchorsAndAliasesNamingTheirLine) {
  Values v;
  EXPECT_THAT(Read("count: 3\nbase: &b {x: 1}\nmore: *b\n", &v),
              ElementsAre("f.yaml: line 2, column 7: YAML anchors (&name) and aliases (*name) "
                          "are not accepted (anchor '&b'); write each value out where it is "
                          "used"));
  EXPECT_EQ(v.count, 7) << "nothing was read";
  EXPECT_THAT(Read("name: &n x\n", &v), ElementsAre(::testing::HasSubstr("line 1, column 7")));
  EXPECT_THAT(Read("widths: [1, 2]\n", &v), IsEmpty());
}

// A bad document can hold a problem per key: the list keeps the first kMaxErrorLines and
// counts the rest, so a message stays bounded whatever the document.
TEST(ErrorListTest, KeepsTheFirstProblemsAndCountsTheRest) {
  ErrorList errors("f.yaml");
  for (size_t i = 0; i < kMaxErrorLines + 250; ++i) {
    if (i % 2 == 0) {
      errors.Add("k" + std::to_string(i), "unknown key");
    } else {
      errors.AddLine("line " + std::to_string(i));
    }
  }
  EXPECT_EQ(errors.lines().size(), kMaxErrorLines);
  EXPECT_EQ(errors.lines().back(), "f.yaml: line 99");
  EXPECT_EQ(errors.dropped(), 250u);
  const std::string message(errors.ToStatus("; ").message());
  EXPECT_THAT(message, ::testing::StartsWith("f.yaml: k0: unknown key; f.yaml: line 1; "));
  EXPECT_THAT(message, ::testing::EndsWith("; f.yaml: line 99; ... and 250 more"));
}

}  // namespace
}  // namespace fuserank::engine
