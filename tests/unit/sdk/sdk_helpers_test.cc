// The C++ helpers of the SDK (weft/sdk/), run against the real host table.
#include <gtest/gtest.h>

#include <new>
#include <stdexcept>

#include "core/plugin/host_services.h"
#include "weft/sdk/plugin.h"

namespace weft {
namespace {

class SdkHelpers : public ::testing::Test {
 protected:
  void SetUp() override { sdk::internal::g_host = plugin::HostTable(); }
};

Status Take(weft_status_t status) { return plugin::TakeStatus(status); }

TEST_F(SdkHelpers, GuardPassesStatusThrough) {
  EXPECT_TRUE(Take(sdk::Guard([] {})).ok());
  EXPECT_TRUE(Take(sdk::Guard([]() -> weft_status_t { return nullptr; })).ok());
  Status s = Take(sdk::Guard([] { return sdk::MakeStatus(WEFT_NOT_FOUND, "no such device"); }));
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_EQ(s.message(), "no such device");
}

TEST_F(SdkHelpers, GuardTurnsSdkErrorIntoItsCode) {
  Status s = Take(sdk::Guard([] { throw sdk::Error(WEFT_UNAVAILABLE, "no GPU here"); }));
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_EQ(s.message(), "no GPU here");
}

TEST_F(SdkHelpers, GuardTurnsStdExceptionIntoInternal) {
  Status s = Take(sdk::Guard([] { throw std::runtime_error("frobnicator exploded"); }));
  EXPECT_EQ(s.code(), Code::kInternal);
  EXPECT_EQ(s.message(), "uncaught C++ exception: frobnicator exploded");
}

TEST_F(SdkHelpers, GuardTurnsBadAllocIntoResourceExhausted) {
  Status s = Take(sdk::Guard([] { throw std::bad_alloc(); }));
  EXPECT_EQ(s.code(), Code::kResourceExhausted);
  EXPECT_EQ(s.message(), "out of memory: std::bad_alloc");
}

TEST_F(SdkHelpers, GuardTurnsAnythingElseIntoUnknown) {
  Status s = Take(sdk::Guard([] { throw 42; }));
  EXPECT_EQ(s.code(), Code::kUnknown);
  EXPECT_EQ(s.message(), "uncaught C++ exception of unknown type");
}

TEST_F(SdkHelpers, ThrowIfErrorAndStatusOwnership) {
  EXPECT_NO_THROW(sdk::ThrowIfError(nullptr));
  try {
    sdk::ThrowIfError(sdk::MakeStatus(WEFT_DATA_LOSS, "bad crc"));
    FAIL() << "no exception";
  } catch (const sdk::Error& e) {
    EXPECT_EQ(e.code(), WEFT_DATA_LOSS);
    EXPECT_STREQ(e.what(), "bad crc");
  }
  sdk::Status owned(sdk::MakeStatus(WEFT_ABORTED, "stop"));
  EXPECT_FALSE(owned.ok());
  EXPECT_EQ(owned.code(), WEFT_ABORTED);
  sdk::Status moved = std::move(owned);
  EXPECT_TRUE(owned.ok());  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  Status released = Take(moved.release());
  EXPECT_EQ(released.message(), "stop");
  EXPECT_TRUE(moved.ok());
}

TEST_F(SdkHelpers, OkCodeMakesNoStatus) { EXPECT_EQ(sdk::MakeStatus(WEFT_OK, "fine"), nullptr); }

TEST(SdkStruct, MakeSetsSizeAndZeroes) {
  auto props = sdk::Make<weft_device_properties_t>();
  EXPECT_EQ(props.struct_size, sizeof(weft_device_properties_t));
  EXPECT_EQ(props.model, nullptr);
  EXPECT_EQ(props.memory_bytes, 0u);
}

TEST(SdkStruct, FillOutRespectsAnOlderCallersSize) {
  // A caller compiled against a layout that ends at |alignment|.
  weft_device_properties_t out{};
  out.struct_size = WEFT_STRUCT_SIZE_THROUGH(weft_device_properties_t, alignment);
  out.host_visible = 7;  // beyond the caller's size: must stay untouched
  auto full = sdk::Make<weft_device_properties_t>();
  full.memory_bytes = 123;
  full.alignment = 64;
  full.host_visible = 1;
  sdk::FillOut(&out, full);
  EXPECT_EQ(out.struct_size, WEFT_STRUCT_SIZE_THROUGH(weft_device_properties_t, alignment));
  EXPECT_EQ(out.memory_bytes, 123u);
  EXPECT_EQ(out.alignment, 64u);
  EXPECT_EQ(out.host_visible, 7);
  EXPECT_TRUE(WEFT_STRUCT_HAS(&out, weft_device_properties_t, alignment));
  EXPECT_FALSE(WEFT_STRUCT_HAS(&out, weft_device_properties_t, host_visible));
}

// A kernel definition as a future plugin might compile it: a bigger struct.
struct FutureKernelDef {
  weft_kernel_def_t v1;
  double added_in_1_7;
};

TEST(SdkStruct, StructArrayWalksWithTheElementStride) {
  FutureKernelDef defs[3] = {};
  const char* ops[] = {"Add", "Mul", "Neg"};
  for (int i = 0; i < 3; ++i) {
    defs[i].v1.struct_size = sizeof(FutureKernelDef);
    defs[i].v1.op = ops[i];
  }
  sdk::StructArray<weft_kernel_def_t> array(&defs[0].v1, 3);
  ASSERT_EQ(array.size(), 3u);
  EXPECT_TRUE(array.valid(WEFT_KERNEL_DEF_SIZE_V1_0));
  EXPECT_STREQ(array[2].op, "Neg");
  std::vector<std::string> seen;
  for (const weft_kernel_def_t& k : array) seen.emplace_back(k.op);
  EXPECT_EQ(seen, (std::vector<std::string>{"Add", "Mul", "Neg"}));
  EXPECT_STREQ(WEFT_ARRAY_AT(weft_kernel_def_t, &defs[0].v1, 1)->op, "Mul");
  static_assert(std::forward_iterator<sdk::StructArray<weft_kernel_def_t>::iterator>);
}

TEST(SdkStruct, StructArrayRejectsBadStrides) {
  weft_kernel_def_t defs[2] = {};
  EXPECT_TRUE(sdk::StructArray<weft_kernel_def_t>(nullptr, 5).empty());
  EXPECT_TRUE(sdk::StructArray<weft_kernel_def_t>(defs, 2).empty());  // struct_size 0
  defs[0].struct_size = 12;                                           // not a multiple of the alignment
  EXPECT_TRUE(sdk::StructArray<weft_kernel_def_t>(defs, 2).empty());
  defs[0].struct_size = 16;  // aligned, but older than 1.0
  sdk::StructArray<weft_kernel_def_t> old(defs, 2);
  EXPECT_EQ(old.size(), 2u);
  EXPECT_FALSE(old.valid(WEFT_KERNEL_DEF_SIZE_V1_0));
}

TEST(SdkAbi, DtypeNumbersAreFixedForever) {
  // These numbers are part of the ABI (and TensorFlow's numbering).
  EXPECT_EQ(WEFT_DTYPE_F32, 1);
  EXPECT_EQ(WEFT_DTYPE_F64, 2);
  EXPECT_EQ(WEFT_DTYPE_I32, 3);
  EXPECT_EQ(WEFT_DTYPE_U8, 4);
  EXPECT_EQ(WEFT_DTYPE_I16, 5);
  EXPECT_EQ(WEFT_DTYPE_I8, 6);
  EXPECT_EQ(WEFT_DTYPE_STRING, 7);
  EXPECT_EQ(WEFT_DTYPE_I64, 9);
  EXPECT_EQ(WEFT_DTYPE_BOOL, 10);
  EXPECT_EQ(WEFT_DTYPE_BF16, 14);
  EXPECT_EQ(WEFT_DTYPE_F16, 19);
  EXPECT_EQ(weft_dtype_size(WEFT_DTYPE_BF16), 2u);
  EXPECT_EQ(weft_dtype_size(WEFT_DTYPE_BOOL), 1u);
  EXPECT_EQ(weft_dtype_size(8), 0u);
  EXPECT_STREQ(weft_dtype_name(WEFT_DTYPE_F16), "f16");
  EXPECT_EQ(weft_dtype_name(0), nullptr);
}

TEST(SdkAbi, StatusCodesMatchTheCore) {
  EXPECT_EQ(static_cast<int>(Code::kUnauthenticated), WEFT_UNAUTHENTICATED);
  for (int code = 0; code <= WEFT_CODE_MAX; ++code) {
    EXPECT_EQ(CodeName(static_cast<Code>(code)), weft_code_name(code)) << code;
  }
}

TEST(SdkAbi, HostTableIsComplete) {
  const weft_host_t* host = plugin::HostTable();
  EXPECT_GE(host->struct_size, WEFT_HOST_SIZE_V1_0);
  EXPECT_EQ(host->abi_major, static_cast<uint32_t>(WEFT_ABI_VERSION_MAJOR));
  EXPECT_NE(host->status_new, nullptr);
  EXPECT_NE(host->parallel_for, nullptr);
  EXPECT_NE(host->option_get_string, nullptr);
  void* p = host->host_alloc(100, 256);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);
  host->host_free(p);
  EXPECT_EQ(host->host_alloc(8, 3), nullptr);  // not a power of two
}

TEST(SdkAbi, HostParallelForCoversTheRange) {
  const weft_host_t* host = plugin::HostTable();
  std::vector<int> hits(10'000, 0);
  host->parallel_for(
      10'000, 10'000,
      [](void* user, int64_t begin, int64_t end) {
        auto& v = *static_cast<std::vector<int>*>(user);
        for (int64_t i = begin; i < end; ++i) v[static_cast<std::size_t>(i)]++;
      },
      &hits);
  for (int h : hits) ASSERT_EQ(h, 1);
  EXPECT_GE(host->intra_op_threads(), 1);
}

TEST(SdkAbi, OptionGettersReadValidatedValues) {
  config::OptionSpec spec;
  spec.key = "count";
  spec.type = config::OptionType::kInt;
  spec.default_value = *config::ParseTomlValue("3");
  auto values = config::ValidateOptions(nullptr, "devices.x", {spec});
  ASSERT_TRUE(values.ok());
  const weft_host_t* host = plugin::HostTable();
  const weft_options_t* options = plugin::AsOptionsHandle(&*values);
  int64_t count = 0;
  EXPECT_EQ(host->option_get_int(options, "count", &count), nullptr);
  EXPECT_EQ(count, 3);
  Status wrong = plugin::TakeStatus(host->option_get_string(options, "count", nullptr));
  EXPECT_EQ(wrong.message(), "option \"count\": NULL options handle, key or output pointer");
  const char* text = nullptr;
  wrong = plugin::TakeStatus(host->option_get_string(options, "count", &text));
  EXPECT_EQ(wrong.message(), "devices.x.count: holds 3, not a string");
  Status missing = plugin::TakeStatus(host->option_get_bool(options, "nope", nullptr));
  EXPECT_EQ(missing.code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace weft
