// The config keys of several models and reloads: models[i].default, at most one default,
// model.watch_interval_seconds (with model.path or beside a models list), model.roots and
// model.memory_budget_bytes, and that the effective config reads back to the same values.
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config.h"

namespace fuserank::server {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kFile[] = "test.yaml";

TEST(ModelConfigTest, WatchIsOnEveryFiveSecondsByDefault) {
  absl::StatusOr<Config> config = ParseConfig("", kFile);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->model_watch_interval_seconds, 5);
  EXPECT_FALSE(config->models[0].is_default);
}

TEST(ModelConfigTest, ReadsTheDefaultFlagAndTheWatchInterval) {
  absl::StatusOr<Config> config = ParseConfig(R"(
model: {watch_interval_seconds: 0}
models:
  - {name: a, path: a.yaml}
  - {name: b, path: b.yaml, default: true}
)",
                                              kFile);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->model_watch_interval_seconds, 0);
  ASSERT_EQ(config->models.size(), 2u);
  EXPECT_FALSE(config->models[0].is_default);
  EXPECT_TRUE(config->models[1].is_default);
}

TEST(ModelConfigTest, ModelPathTakesAWatchIntervalToo) {
  absl::StatusOr<Config> config =
      ParseConfig("model: {path: m.yaml, watch_interval_seconds: 30}\n", kFile);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->models[0].path, "m.yaml");
  EXPECT_EQ(config->model_watch_interval_seconds, 30);
}

TEST(ModelConfigTest, RefusesTwoDefaults) {
  absl::StatusOr<Config> config = ParseConfig(
      "models: [{name: a, path: a.yaml, default: true}, {name: b, path: b.yaml, default: "
      "true}]\n",
      kFile);
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(),
              HasSubstr("test.yaml: models[1].default: only one model can be the default; "
                        "models[0] already is"));
}

TEST(ModelConfigTest, RefusesBadWatchIntervalsAndDefaultFlags) {
  absl::StatusOr<Config> negative = ParseConfig("model: {watch_interval_seconds: -1}\n", kFile);
  ASSERT_FALSE(negative.ok());
  EXPECT_THAT(negative.status().message(),
              HasSubstr("model.watch_interval_seconds: must be in 0..86400, got -1"));
  absl::StatusOr<Config> text =
      ParseConfig("models: [{path: a.yaml, default: yes please}]\n", kFile);
  ASSERT_FALSE(text.ok());
  EXPECT_THAT(text.status().message(), HasSubstr("models[0].default: must be true or false"));
  absl::StatusOr<Config> both = ParseConfig(
      "model: {path: a.yaml, watch_interval_seconds: 1}\nmodels: [{path: b.yaml}]\n", kFile);
  ASSERT_FALSE(both.ok());
  EXPECT_THAT(both.status().message(), HasSubstr("models: give either model.path or models"));
}

TEST(ModelConfigTest, TheEffectiveConfigReadsBackToTheSameModels) {
  for (const char* yaml : {"model: {path: m.yaml, watch_interval_seconds: 7}\n",
                           "model: {watch_interval_seconds: 0}\nmodels: [{name: a, path: a.yaml}, "
                           "{path: b.yaml, default: true}]\n",
                           "models: [{path: only.yaml, default: true}]\n"}) {
    absl::StatusOr<Config> config = ParseConfig(yaml, kFile);
    ASSERT_TRUE(config.ok()) << config.status();
    const std::string effective = EffectiveConfigYaml(*config);
    absl::StatusOr<Config> again = ParseConfig(effective, kFile);
    ASSERT_TRUE(again.ok()) << again.status() << "\n" << effective;
    EXPECT_EQ(again->model_watch_interval_seconds, config->model_watch_interval_seconds);
    ASSERT_EQ(again->models.size(), config->models.size()) << effective;
    for (size_t i = 0; i < config->models.size(); ++i) {
      EXPECT_EQ(again->models[i].name, config->models[i].name);
      EXPECT_EQ(again->models[i].path, config->models[i].path);
      EXPECT_EQ(again->models[i].is_default, config->models[i].is_default);
    }
  }
}

TEST(ModelConfigTest, ReadsTheModelRootsAndTheMemoryBudget) {
  const std::string root = ::testing::TempDir();
  absl::StatusOr<Config> config =
      ParseConfig(absl::StrCat("model: {path: m.yaml, roots: [\"", root,
                               "\", /etc], memory_budget_bytes: 2147483648}\n"),
                  kFile);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->model_roots, ::testing::ElementsAre(root, "/etc"));
  EXPECT_EQ(config->model_memory_budget_bytes, int64_t{2147483648});
  absl::StatusOr<Config> again = ParseConfig(EffectiveConfigYaml(*config), kFile);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->model_roots, config->model_roots);
  EXPECT_EQ(again->model_memory_budget_bytes, config->model_memory_budget_bytes);
  // The defaults: no roots (the configured models' directories), budget 0 (automatic).
  absl::StatusOr<Config> defaults = ParseConfig("", kFile);
  ASSERT_TRUE(defaults.ok());
  EXPECT_TRUE(defaults->model_roots.empty());
  EXPECT_EQ(defaults->model_memory_budget_bytes, 0);
  EXPECT_THAT(EffectiveConfigYaml(*defaults),
              AllOf(HasSubstr("roots: []"), HasSubstr("memory_budget_bytes: 0")));
}

TEST(ModelConfigTest, RefusesRootsThatAreNoDirectoriesAndTinyBudgets) {
  struct Case {
    const char* yaml;
    const char* message;
  };
  for (const Case& c : {
           Case{"model: {roots: [/nonexistent/models]}\n",
                "model.roots[0]: cannot use '/nonexistent/models': No such file"},
           Case{"model: {roots: [/etc/hostname]}\n",
                "model.roots[0]: '/etc/hostname' is not a directory"},
           Case{"model: {roots: [\"\"]}\n", "model.roots[0]: must not be empty"},
           Case{"model: {roots: /etc}\n", "model.roots: must be a list of strings"},
           Case{"model: {roots: [[a]]}\n", "model.roots[0]: must be a string"},
           Case{"model: {memory_budget_bytes: 4096}\n",
                "model.memory_budget_bytes: must be 0 (three quarters of the memory available) "
                "or at least 1048576, got 4096"},
           Case{"model: {memory_budget_bytes: -1}\n", "model.memory_budget_bytes: must be 0"},
       }) {
    absl::StatusOr<Config> config = ParseConfig(c.yaml, kFile);
    ASSERT_FALSE(config.ok()) << c.yaml;
    EXPECT_THAT(config.status().message(), HasSubstr(absl::StrCat("test.yaml: ", c.message)))
        << c.yaml;
  }
}

}  // namespace
}  // namespace fuserank::server
