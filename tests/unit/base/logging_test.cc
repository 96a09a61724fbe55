#include "core/base/logging.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

namespace weft {
namespace {

struct Captured {
  LogLevel level;
  std::string source;
  std::string message;
};

class LoggingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    old_level_ = GetLogLevel();
    old_sink_ = SetLogSink([this](const LogRecord& r) {
      records_.push_back({r.level, std::string(r.source), std::string(r.message)});
    });
  }
  void TearDown() override {
    SetLogSink(old_sink_);
    SetLogLevel(old_level_);
    ASSERT_TRUE(SetLogDestination("", LogFormat::kText).ok());
  }
  std::vector<Captured> records_;
  LogLevel old_level_;
  LogSink old_sink_;
};

TEST_F(LoggingTest, FiltersByLevel) {
  SetLogLevel(LogLevel::kWarning);
  WEFT_LOG(INFO) << "hidden";
  WEFT_LOG(WARNING) << "shown " << 42;
  WEFT_LOG_FROM(ERROR, "plugins") << "also shown";
  ASSERT_EQ(records_.size(), 2u);
  EXPECT_EQ(records_[0].message, "shown 42");
  EXPECT_EQ(records_[0].source, "weft");
  EXPECT_EQ(records_[1].level, LogLevel::kError);
  EXPECT_EQ(records_[1].source, "plugins");
}

TEST_F(LoggingTest, OffSilencesEverything) {
  SetLogLevel(LogLevel::kOff);
  WEFT_LOG(ERROR) << "nothing";
  EXPECT_TRUE(records_.empty());
}

TEST_F(LoggingTest, LevelNamesRoundTrip) {
  for (const char* name : {"trace", "debug", "info", "warning", "error", "off"}) {
    auto level = ParseLogLevel(name);
    ASSERT_TRUE(level.has_value()) << name;
    EXPECT_EQ(LogLevelName(*level), name);
  }
  EXPECT_FALSE(ParseLogLevel("verbose").has_value());
}

TEST_F(LoggingTest, WritesJsonLinesToFile) {
  SetLogSink(nullptr);  // the built-in writer
  char path[] = "/tmp/weft_log_test_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  ASSERT_TRUE(SetLogDestination(path, LogFormat::kJson).ok());
  SetLogLevel(LogLevel::kInfo);
  WEFT_LOG(INFO) << "quote \" and newline\n";
  ASSERT_TRUE(SetLogDestination("", LogFormat::kText).ok());
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(path);
  const std::string line = text.str();
  EXPECT_NE(line.find("\"level\":\"info\""), std::string::npos) << line;
  EXPECT_NE(line.find("\"source\":\"weft\""), std::string::npos) << line;
  EXPECT_NE(line.find("\"message\":\"quote \\\" and newline\\n\"}"), std::string::npos) << line;
}

TEST_F(LoggingTest, UnwritableFileIsAnErrorNamingIt) {
  Status status = SetLogDestination("/nonexistent-dir/weft.log", LogFormat::kText);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message(),
            "cannot open log file \"/nonexistent-dir/weft.log\" for appending: No such file or "
            "directory");
}

}  // namespace
}  // namespace weft
