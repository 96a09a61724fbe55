#include "gpu/kernel_framework.h"

#include <algorithm>
#include <cstring>

namespace weft::gpu {

Tensor::Tensor(const weft_tensor_t& v)
    : dtype(v.dtype), dims(v.dims, v.dims + v.rank), num_elements(v.num_elements), byte_size(v.byte_size) {
  if (v.buffer != nullptr) {
    ptr = static_cast<char*>(reinterpret_cast<Buffer*>(v.buffer)->ptr) + v.offset;
  } else {
    host = v.data;
  }
}

void CheckLaunch(const char* what) {
  const rt::Error error = rt::GetLastError();
  if (error != rt::kSuccess) ThrowRuntimeError(error, Str("launching the ", what, " kernel"));
}

int64_t Product(const Dims& dims, int begin, int end) {
  int64_t p = 1;
  for (int i = begin; i < end; ++i) p *= dims[static_cast<std::size_t>(i)];
  return p;
}

// --- Context -----------------------------------------------------------------------

Context::Context(weft_device_t device, weft_kernel_context_t* ctx) : sdk::BasicKernelContext<Tensor>(device, ctx) {
  this->device().MakeCurrent();
  stream_ = &stream_as<Stream>();
}

void Context::Read(const Tensor& t, void* dst) {
  if (t.byte_size == 0) return;
  if (t.host != nullptr) {
    std::memcpy(dst, t.host, t.byte_size);
    return;
  }
  Check(rt::CopyDeviceToHost(dst, t.ptr, t.byte_size, stream()), "reading a value to the host");
  Check(rt::StreamSynchronize(stream()), "waiting for a value read to the host");
}

std::vector<int64_t> Context::ReadInts(const Tensor& t) {
  const auto n = static_cast<std::size_t>(t.num_elements);
  std::vector<int64_t> out(n);
  if (t.dtype == WEFT_DTYPE_I64) {
    Read(t, out.data());
  } else if (t.dtype == WEFT_DTYPE_I32) {
    std::vector<int32_t> narrow(n);
    Read(t, narrow.data());
    std::copy(narrow.begin(), narrow.end(), out.begin());
  } else {
    Fail("expected an i32 or i64 tensor, got ", DtypeName(t.dtype));
  }
  return out;
}

Dims Context::ReadShape(const Tensor& t, const char* what) {
  if (t.rank() != 1) Fail(what, " must be 1-D, got shape ", DimsString(t.dims));
  if (t.num_elements > kMaxDims) Fail(what, " has ", t.num_elements, " entries; the largest rank is ", kMaxDims);
  Dims dims = ReadInts(t);
  for (int64_t d : dims) {
    if (d < 0) Fail(what, " ", DimsString(dims), " has a negative dimension");
  }
  return dims;
}

double Context::ReadFloat(const Tensor& t) {
  if (t.num_elements != 1) Fail("expected a scalar, got shape ", DimsString(t.dims));
  if (t.dtype == WEFT_DTYPE_F32) {
    float v = 0;
    Read(t, &v);
    return v;
  }
  if (t.dtype == WEFT_DTYPE_F64) {
    double v = 0;
    Read(t, &v);
    return v;
  }
  Fail("expected an f32 or f64 scalar, got ", DtypeName(t.dtype));
}

// --- Index plans -------------------------------------------------------------------

namespace {

template <int N>
BroadcastPlan<N> Pack(const Dims& out, const std::vector<const Dims*>& operands) {
  const sdk::BroadcastLayout layout = sdk::PlanBroadcast(out, operands);
  if (layout.dims.size() > static_cast<std::size_t>(kMaxDims)) {
    Fail("rank ", layout.dims.size(), " is above ", kMaxDims);
  }
  BroadcastPlan<N> plan;
  plan.rank = static_cast<int>(layout.dims.size());
  for (std::size_t i = 0; i < layout.dims.size(); ++i) {
    plan.dims[i] = layout.dims[i];
    for (int k = 0; k < N; ++k) plan.strides[k][i] = layout.strides[static_cast<std::size_t>(k)][i];
  }
  return plan;
}

}  // namespace

BroadcastPlan<1> PlanBroadcast1(const Dims& out, const Dims& a) { return Pack<1>(out, {&a}); }
BroadcastPlan<2> PlanBroadcast2(const Dims& out, const Dims& a, const Dims& b) { return Pack<2>(out, {&a, &b}); }
BroadcastPlan<3> PlanBroadcast3(const Dims& out, const Dims& a, const Dims& b, const Dims& c) {
  return Pack<3>(out, {&a, &b, &c});
}

ReducePlan PlanReduce(const Dims& in, const std::vector<bool>& reduce) {
  const sdk::ReduceLayout layout = sdk::PlanReduce(in, reduce);
  ReducePlan plan;
  plan.kept_rank = static_cast<int>(layout.kept_dims.size());
  plan.red_rank = static_cast<int>(layout.reduced_dims.size());
  for (std::size_t i = 0; i < layout.kept_dims.size(); ++i) {
    plan.kept_dims[i] = layout.kept_dims[i];
    plan.kept_strides[i] = layout.kept_strides[i];
  }
  for (std::size_t i = 0; i < layout.reduced_dims.size(); ++i) {
    plan.red_dims[i] = layout.reduced_dims[i];
    plan.red_strides[i] = layout.reduced_strides[i];
  }
  plan.num_out = layout.num_out;
  plan.num_reduced = layout.num_reduced;
  return plan;
}

}  // namespace weft::gpu
