#include "tests/support/test_dir.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace weft::testing {

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteFile(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TestDir::TestDir(std::string_view prefix, bool create, Keep keep) : keep_(keep) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  // A parameterized test's name ends in "/<index>": one directory, not two.
  std::string name = test != nullptr ? test->name() : "none";
  std::replace(name.begin(), name.end(), '/', '_');
  path_ = fs::temp_directory_path() / (std::string(prefix) + "_" + std::to_string(getpid()) + "_" + name);
  fs::remove_all(path_);
  if (create) fs::create_directories(path_);
}

TestDir::~TestDir() {
  if (keep_ == Keep::kOnFailure && ::testing::Test::HasFailure()) return;
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

std::string TestDir::File(const std::string& name) const { return (path_ / name).string(); }

std::string TestDir::Write(const std::string& name, const std::string& text) const {
  const fs::path path = path_ / name;
  std::ofstream(path) << text;
  return path.string();
}

std::vector<std::string> TestDir::Files() const {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(path_)) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace weft::testing
