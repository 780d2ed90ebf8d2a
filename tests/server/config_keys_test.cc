// The key table of the server config (server/config_keys.h): each key declared once, the
// checked-in reference config/fuserank.yaml written from it and listing exactly the
// declared keys with their defaults, and the server config and the model spec read by
// the one YAML reader with the same rules.
#include "server/config_keys.h"

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "engine/model_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config.h"

namespace fuserank::server {
namespace {

using ::testing::HasSubstr;

constexpr char kReference[] = FUSERANK_SOURCE_DIR "/config/fuserank.yaml";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The dotted paths of every scalar or list in `node` (lists are leaves).
void LeafPaths(const YAML::Node& node, const std::string& path, std::set<std::string>* out) {
  if (!node.IsMap()) {
    out->insert(path);
    return;
  }
  for (const auto& entry : node) {
    const std::string key = entry.first.Scalar();
    LeafPaths(entry.second, path.empty() ? key : path + "." + key, out);
  }
}

// The node at parts[i..] below `node`.
YAML::Node At(const YAML::Node& node, const std::vector<std::string>& parts, size_t i) {
  if (i == parts.size()) return node;
  return At(node[parts[i]], parts, i + 1);
}

TEST(ConfigKeysTest, EachKeyIsDeclaredOnceWithAReaderAndAValue) {
  std::set<std::string> paths;
  for (const ConfigKey& key : ConfigKeys()) {
    EXPECT_TRUE(paths.insert(key.path).second) << key.path << " declared twice";
    EXPECT_TRUE(key.read) << key.path;
    EXPECT_TRUE(key.value) << key.path;
    EXPECT_FALSE(key.doc.empty() && key.constraint.empty()) << key.path << " has no doc";
  }
}

TEST(ConfigKeysTest, CheckedInReferenceIsWrittenFromTheTable) {
  EXPECT_EQ(ReadFile(kReference), ReferenceConfigYaml())
      << "config/fuserank.yaml is stale: run\n"
         "  build/bin/fuserank-server --print-reference-config > config/fuserank.yaml";
}

TEST(ConfigKeysTest, ReferenceListsExactlyTheDeclaredKeysWithTheirDefaults) {
  const YAML::Node reference = YAML::LoadFile(kReference);
  std::set<std::string> listed;
  LeafPaths(reference, "", &listed);
  const Config defaults;
  std::set<std::string> declared;
  for (const ConfigKey& key : ConfigKeys()) {
    if (!key.present || key.present(defaults)) declared.insert(key.path);
  }
  EXPECT_EQ(listed, declared);
  for (const ConfigKey& key : ConfigKeys()) {
    if (key.present && !key.present(defaults)) continue;
    const std::vector<std::string> parts = absl::StrSplit(key.path, '.');
    EXPECT_EQ(YAML::Dump(At(reference, parts, 0)), YAML::Dump(YAML::Load(key.value(defaults))))
        << key.path;
  }
  absl::StatusOr<Config> parsed = LoadConfigFile(kReference);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(EffectiveConfigYaml(*parsed), EffectiveConfigYaml(defaults));
}

TEST(ConfigKeysTest, EveryRangedKeyRefusesAValueOutsideItsRange) {
  for (const ConfigKey& key : ConfigKeys()) {
    const size_t dots = key.constraint.find("..");
    if (dots == std::string::npos || key.constraint.find(' ') != std::string::npos) continue;
    const std::string hi = key.constraint.substr(dots + 2);
    const std::string above = hi == "1" ? "1.5" : hi + "0";
    std::string yaml;
    std::string indent;
    std::vector<std::string> parts = absl::StrSplit(key.path, '.');
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      yaml += indent + parts[i] + ":\n";
      indent += "  ";
    }
    yaml += indent + parts.back() + ": " + above + "\n";
    absl::StatusOr<Config> config = ParseConfig(yaml, "f.yaml");
    ASSERT_FALSE(config.ok()) << key.path << ": " << above << " accepted";
    EXPECT_THAT(config.status().message(), HasSubstr("f.yaml: " + key.path + ": ")) << yaml;
  }
}

// One rule broken the same way in a server config and in a model spec.
struct SharedRuleCase {
  std::string name;
  std::string config;  // server config text
  std::string spec;    // model spec text (the rest of a valid spec is added)
  std::string reason;  // the reason both messages give
};

class SharedReaderRulesTest : public ::testing::TestWithParam<SharedRuleCase> {};

constexpr char kSpecRest[] =
    "weights: m.safetensors\ninteraction: concat\ntables: [{name: t, side: user, rows: 10, "
    "dim: 4}]\n";

TEST_P(SharedReaderRulesTest, ConfigAndModelSpecGiveTheSameReason) {
  const SharedRuleCase& c = GetParam();
  absl::StatusOr<Config> config = ParseConfig(c.config, "f.yaml");
  ASSERT_FALSE(config.ok()) << c.config;
  EXPECT_THAT(config.status().message(), HasSubstr(c.reason));
  absl::StatusOr<engine::ModelSpec> spec = engine::ParseModelSpec(c.spec + kSpecRest, "");
  ASSERT_FALSE(spec.ok()) << c.spec;
  EXPECT_THAT(spec.status().message(), HasSubstr(c.reason));
}

INSTANTIATE_TEST_SUITE_P(
    Rules, SharedReaderRulesTest,
    ::testing::Values(SharedRuleCase{"duplicate_key",
                                     "server:\n  max_candidates: 2\n  max_candidates: 3\n",
                                     "name: m\nname: n\ntop_mlp: [1]\n", "given more than once"},
                      SharedRuleCase{"quoted_number", "server: {max_candidates: \"8\"}",
                                     "name: m\ncross_dim: \"0\"\ntop_mlp: [1]\n",
                                     "must be an integer, got the string '"},
                      SharedRuleCase{"unknown_key", "server: {colour: red}",
                                     "name: m\ncolour: red\ntop_mlp: [1]\n",
                                     "colour: unknown key (known here: "},
                      SharedRuleCase{"does_not_fit_an_int", "server: {max_candidates: 99999999999}",
                                     "name: m\ncross_dim: 99999999999\ntop_mlp: [1]\n",
                                     "is out of range, got 99999999999"},
                      SharedRuleCase{"out_of_range", "engine: {cpu_threads: 0}",
                                     "name: m\ntop_mlp: [0]\n", "must be in 1.."},
                      SharedRuleCase{"wrong_type", "server: {listen: [a]}",
                                     "name: [m]\ntop_mlp: [1]\n", "must be a string, got a list"}),
    [](const ::testing::TestParamInfo<SharedRuleCase>& info) { return info.param.name; });

}  // namespace
}  // namespace fuserank::server
