// Random numbers. Every op draws from a counter-based generator (Philox
// 4x32-10) keyed by its seeds: with the same (seed, seed2) the n-th run of
// the op gives the same numbers on every machine and every thread count.
// seed = seed2 = 0 picks a key from the node's name, so an unseeded graph is
// still reproducible run to run.
#include "core/ops/ops.h"
#include "core/ops/shape_fns.h"

namespace weft::ops {
namespace {

Status RandomShape(InferenceContext& c) {
  if (auto dims = ConstIntVector(c, 0)) {
    for (int64_t d : *dims) {
      if (d < 0) return c.Error("shape ", ListString(*dims), " has a negative dimension");
    }
    c.set_output(0, Shape(*dims));
    return Status();
  }
  const Shape& s = c.input_shape(0);
  c.set_output(0,
               s.rank() == 1 && s.dim(0) >= 0 ? Shape::UnknownDims(static_cast<int>(s.dim(0))) : Shape::UnknownRank());
  return Status();
}

}  // namespace

Status RegisterRandomOps(OpRegistry& r) {
  struct Spec {
    const char* name;
    const char* doc;
  };
  constexpr Spec kSpecs[] = {
      {"RandomUniform", "Uniform random numbers in [0, 1)."},
      {"RandomNormal", "Normal random numbers with mean 0 and standard deviation 1 (Box-Muller)."},
      {"TruncatedNormal",
       "Normal random numbers with mean 0 and standard deviation 1, redrawn until within 2 standard "
       "deviations of the mean."},
  };
  for (const Spec& s : kSpecs) {
    WEFT_RETURN_IF_ERROR(r.Register(
        OpDefBuilder(s.name)
            .Input("shape: T")
            .Output("output: dtype")
            .Attr("T: {i32, i64}")
            .Attr("dtype: {f16, bf16, f32, f64}")
            .Attr("seed: int = 0")
            .Attr("seed2: int = 0")
            .Stateful()
            .Shape(RandomShape)
            .Doc(StrCat(s.doc, " The output shape is the 1-D input 'shape'. Deterministic: see the seeds."))));
  }
  WEFT_RETURN_IF_ERROR(
      r.Register(OpDefBuilder("RandomShuffle")
                     .Input("value: T")
                     .Output("output: T")
                     .Attr("T: {all}")
                     .Attr("seed: int = 0")
                     .Attr("seed2: int = 0")
                     .Stateful()
                     .Shape(UnchangedShape)
                     .Doc("The input with its first dimension randomly permuted (Fisher-Yates); a scalar is returned "
                          "unchanged. Deterministic: see the seeds.")));
  return Status();
}

}  // namespace weft::ops
