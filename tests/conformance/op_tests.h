// One GoogleTest per op for the suites that replay case files
// (conformance_test, edge_case_test).
#ifndef WEFT_TESTS_CONFORMANCE_OP_TESTS_H_
#define WEFT_TESTS_CONFORMANCE_OP_TESTS_H_

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace weft::cases {

// Registers suite.<op> for each of |ops|, whose body is |run|(op).
inline void RegisterOpTests(const char* suite, const std::vector<std::string>& ops,
                            const std::function<void(const std::string&)>& run) {
  struct OpTest : ::testing::Test {
    std::string op;
    std::function<void(const std::string&)> body;
    OpTest(std::string o, std::function<void(const std::string&)> b) : op(std::move(o)), body(std::move(b)) {}
    void TestBody() override { body(op); }
  };
  for (const std::string& op : ops) {
    ::testing::RegisterTest(suite, op.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                            [op, run]() -> ::testing::Test* { return new OpTest(op, run); });
  }
}

}  // namespace weft::cases

#endif  // WEFT_TESTS_CONFORMANCE_OP_TESTS_H_
