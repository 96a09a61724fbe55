// Reading the NumPy-generated case files of the conformance kit (`weft
// conformance`, which conformance_test wraps) and the edge-case suite
// (edge_case_test): a TOML list of cases naming .npy inputs and expected
// outputs, and the comparison of a result with NumPy's values. See
// docs/development.md "Conformance".
#ifndef WEFT_TOOLS_CONFORMANCE_CASE_IO_H_
#define WEFT_TOOLS_CONFORMANCE_CASE_IO_H_

#include <toml++/toml.h>

#include <string>
#include <vector>

#include "core/graph/attr_value.h"
#include "core/graph/op_def.h"
#include "core/tensor/tensor.h"

namespace weft::cases {

struct IoSpec {
  std::string file;
  bool bf16 = false;
};

struct Case {
  std::string name;
  std::string op;
  std::vector<IoSpec> inputs;
  std::vector<IoSpec> outputs;
  std::string error;
  double rtol = 0;
  double atol = 0;
  // Zeros must carry the sign NumPy gives them (where IEEE defines it).
  bool signed_zeros = false;
  const toml::table* attrs = nullptr;
};

// The cases of |document| (a parsed cases.toml), in file order; an error
// naming the case when one is malformed. The cases point into |document|.
Expected<std::vector<Case>> ReadCases(const toml::table& document);

// The tensor of |spec| in |dir| (bf16 files hold float32 values).
Expected<Tensor> LoadTensor(const std::string& dir, const IoSpec& spec);

// Element |i| of a numeric or bool tensor as a double (NaN for others).
double AsDouble(const Tensor& t, int64_t i);

// The dtype a spec's expected values stand for.
DType ExpectedDType(const Tensor& file_tensor, const IoSpec& spec);

// The case's attrs, converted by the types the op declares.
Expected<AttrMap> Attrs(const Case& c, const OpDef& op);

// Empty when |got| matches |want| within tolerance; else what differs,
// element by element (the first few), NaN positions, infinities and
// (with |signed_zeros|) the sign of zero included. A bool must be exactly
// 0 or 1 (a byte left unwritten is neither).
std::string Compare(const Tensor& got, const Tensor& want, DType want_dtype, double rtol, double atol,
                    bool signed_zeros = false);

}  // namespace weft::cases

#endif  // WEFT_TOOLS_CONFORMANCE_CASE_IO_H_
