// A served model's config.toml and the [serving] section (docs/serving.md).
#include "core/config/serving_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/config/config.h"

namespace weft::config {
namespace {

using ::testing::HasSubstr;

TEST(ModelServingConfig, DefaultsWhenEmpty) {
  auto config = ParseModelServingConfig("", "m/config.toml");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->signature_name, "serving_default");
  EXPECT_TRUE(config->inputs.empty());
  EXPECT_EQ(config->version_policy, "latest");
  EXPECT_EQ(config->latest, 1);
  EXPECT_TRUE(config->batching);
  EXPECT_FALSE(config->max_batch_size.has_value());
  EXPECT_FALSE(config->batch_timeout_us.has_value());
}

TEST(ModelServingConfig, ReadsEverySection) {
  auto config = ParseModelServingConfig(
      "[signature]\nname = \"predict\"\ninputs = [\"images\"]\noutputs = [\"probs:0\"]\n"
      "[versions]\npolicy = \"specific\"\nspecific = [3, 7]\n"
      "[batching]\nmax_batch_size = 16\nbatch_timeout_us = 500\nmax_enqueued_batches = 2\nnum_batch_threads = 2\n",
      "m/config.toml");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->signature_name, "predict");
  EXPECT_EQ(config->inputs, std::vector<std::string>{"images"});
  EXPECT_EQ(config->outputs, std::vector<std::string>{"probs:0"});
  EXPECT_EQ(config->version_policy, "specific");
  EXPECT_EQ(config->specific, (std::vector<int64_t>{3, 7}));
  EXPECT_EQ(config->max_batch_size, 16);
  EXPECT_EQ(config->batch_timeout_us, 500);
  EXPECT_EQ(config->max_enqueued_batches, 2);
  EXPECT_EQ(config->num_batch_threads, 2);
}

TEST(ModelServingConfig, ErrorsNameFileLineAndKey) {
  auto typo = ParseModelServingConfig("[batching]\nmax_batch_sise = 4\n", "m/config.toml");
  ASSERT_FALSE(typo.ok());
  EXPECT_THAT(typo.status().message(), HasSubstr("m/config.toml:2:1"));
  EXPECT_THAT(typo.status().message(), HasSubstr("max_batch_size"));

  auto section = ParseModelServingConfig("[batchin]\nenabled = true\n", "m/config.toml");
  ASSERT_FALSE(section.ok());
  EXPECT_THAT(section.status().message(), HasSubstr("unknown section; did you mean 'batching'?"));

  auto not_table = ParseModelServingConfig("versions = 3\n", "m/config.toml");
  ASSERT_FALSE(not_table.ok());
  EXPECT_THAT(not_table.status().message(), HasSubstr("expected a table [versions]"));

  auto policy = ParseModelServingConfig("[versions]\npolicy = \"newest\"\n", "m/config.toml");
  ASSERT_FALSE(policy.ok());
  EXPECT_THAT(policy.status().message(), HasSubstr("versions.policy"));

  auto empty = ParseModelServingConfig("[versions]\npolicy = \"specific\"\n", "m/config.toml");
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(empty.status().message(), HasSubstr("policy \"specific\" needs the versions to serve"));

  auto strings = ParseModelServingConfig("[versions]\nspecific = [\"1\"]\n", "m/config.toml");
  ASSERT_FALSE(strings.ok());
  EXPECT_THAT(strings.status().message(), HasSubstr("an array of integers"));

  auto zero = ParseModelServingConfig("[batching]\nmax_batch_size = 0\n", "m/config.toml");
  ASSERT_FALSE(zero.ok());
  EXPECT_THAT(zero.status().message(), HasSubstr("batching.max_batch_size"));

  auto syntax = ParseModelServingConfig("[batching\n", "m/config.toml");
  ASSERT_FALSE(syntax.ok());
  EXPECT_THAT(syntax.status().message(), HasSubstr("m/config.toml:1:"));
}

TEST(ServingSection, DefaultsAndOverrides) {
  auto defaults = ParseConfig("", "local.toml", "/etc/weft");
  ASSERT_TRUE(defaults.ok()) << defaults.status().message();
  EXPECT_EQ(defaults->serving.http_port, 8501);
  EXPECT_EQ(defaults->serving.host, "0.0.0.0");
  EXPECT_EQ(defaults->serving.max_body_mb, 64);
  auto set = ParseConfig("[serving]\nhttp_port = 9000\nbearer_token_file = \"token\"\npoll_interval_s = 0\n",
                         "local.toml", "/etc/weft");
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_EQ(set->serving.http_port, 9000);
  EXPECT_EQ(set->serving.bearer_token_file, "/etc/weft/token");
  EXPECT_EQ(set->serving.poll_interval_s, 0);
  auto bad = ParseConfig("[serving]\nhttp_port = 70000\n", "local.toml", "/etc/weft");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("local.toml:2:13: serving.http_port"));
}

}  // namespace
}  // namespace weft::config
