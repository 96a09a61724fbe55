// Files for tests: reading or writing one whole, and a scratch directory
// for the running test under the system's temporary folder, named after
// the process and the test so that tests run in parallel never share one.
//
//   class Cli : public ::testing::Test {
//    protected:
//     testing::TestDir dir_{"weft_cli_test"};
//   };
//   ... const std::string config = dir_.Write("a.toml", "[cluster]\n");
#ifndef WEFT_TESTS_SUPPORT_TEST_DIR_H_
#define WEFT_TESTS_SUPPORT_TEST_DIR_H_

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace weft::testing {

// The whole content of the file at |path| ("" when it cannot be read).
std::string ReadFile(const std::filesystem::path& path);
// Replaces the content of the file at |path| with |bytes|.
void WriteFile(const std::filesystem::path& path, const std::string& bytes);

class TestDir {
 public:
  enum class Keep {
    kNever,      // removed with the object
    kOnFailure,  // left behind when the test failed, to read what it wrote
  };
  // The directory <temp>/<prefix>_<pid>_<test name>, emptied first; it is
  // made when |create| holds (otherwise the code under test must make it).
  // Must be made while a test runs (a fixture's member, or in its body).
  explicit TestDir(std::string_view prefix, bool create = true, Keep keep = Keep::kNever);
  ~TestDir();
  TestDir(const TestDir&) = delete;
  TestDir& operator=(const TestDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::filesystem::path& name) const { return path_ / name; }
  // The path of |name| in the directory, as a string.
  std::string File(const std::string& name) const;
  // Writes |text| to the file |name| in the directory; returns its path.
  std::string Write(const std::string& name, const std::string& text) const;
  // The names of the directory's entries, sorted.
  std::vector<std::string> Files() const;

 private:
  std::filesystem::path path_;
  Keep keep_;
};

}  // namespace weft::testing

#endif  // WEFT_TESTS_SUPPORT_TEST_DIR_H_
