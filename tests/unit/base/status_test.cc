#include "core/base/status.h"

#include <gtest/gtest.h>

#include <memory>

namespace weft {
namespace {

TEST(Status, DefaultIsOk) {
  Status status;
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(status.code(), Code::kOk);
  EXPECT_EQ(status.ToString(), "OK");
}

TEST(Status, OkCodeDropsMessage) {
  Status status(Code::kOk, "ignored");
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(status.message(), "");
}

TEST(Status, ToStringNamesCode) {
  EXPECT_EQ(InvalidArgumentError("bad ", 3, " things").ToString(), "INVALID_ARGUMENT: bad 3 things");
  EXPECT_EQ(Status(Code::kDataLoss, "crc").ToString(), "DATA_LOSS: crc");
}

TEST(Status, CodeNamesMatchTheCAbi) {
  // The canonical names, as in weft_status.h and every gRPC-family system.
  EXPECT_EQ(CodeName(Code::kCancelled), "CANCELLED");
  EXPECT_EQ(CodeName(Code::kUnavailable), "UNAVAILABLE");
  EXPECT_EQ(CodeName(Code::kUnauthenticated), "UNAUTHENTICATED");
  EXPECT_EQ(CodeName(static_cast<Code>(99)), "UNKNOWN");
}

TEST(Status, WithContextPrefixes) {
  Status status = NotFoundError("no such node").WithContext("graph.wg");
  EXPECT_EQ(status.code(), Code::kNotFound);
  EXPECT_EQ(status.message(), "graph.wg: no such node");
  EXPECT_TRUE(Status().WithContext("x").ok());
}

Expected<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgumentError(x, " is odd");
  return x / 2;
}

Status HalfTwice(int x, int* out) {
  WEFT_ASSIGN_OR_RETURN(int once, Half(x));
  WEFT_ASSIGN_OR_RETURN(*out, Half(once));
  return Status();
}

Status FailIfNegative(int x) {
  if (x < 0) return OutOfRangeError("negative");
  return Status();
}

Status Chain(int x) {
  WEFT_RETURN_IF_ERROR(FailIfNegative(x));
  WEFT_RETURN_IF_ERROR(Half(x));
  return Status();
}

TEST(Expected, HoldsValueOrStatus) {
  Expected<int> good = Half(8);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 4);
  EXPECT_TRUE(good.status().ok());
  Expected<int> bad = Half(3);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "3 is odd");
}

TEST(Expected, OkStatusBecomesInternalError) {
  Expected<int> wrong{Status()};
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), Code::kInternal);
}

TEST(Expected, MoveOnlyValues) {
  Expected<std::unique_ptr<int>> value = std::make_unique<int>(7);
  ASSERT_TRUE(value.ok());
  std::unique_ptr<int> taken = std::move(value).value();
  EXPECT_EQ(*taken, 7);
}

TEST(Macros, AssignOrReturnPropagates) {
  int out = 0;
  EXPECT_TRUE(HalfTwice(12, &out).ok());
  EXPECT_EQ(out, 3);
  Status status = HalfTwice(6, &out);
  EXPECT_EQ(status.code(), Code::kInvalidArgument);
  EXPECT_EQ(status.message(), "3 is odd");
}

TEST(Macros, ReturnIfErrorTakesStatusAndExpected) {
  EXPECT_EQ(Chain(-1).code(), Code::kOutOfRange);
  EXPECT_EQ(Chain(5).message(), "5 is odd");
  EXPECT_TRUE(Chain(4).ok());
}

}  // namespace
}  // namespace weft
