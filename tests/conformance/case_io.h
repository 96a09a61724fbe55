// Reading the NumPy-generated case files shared by the conformance suite
// (conformance_test) and the edge-case suite (edge_case_test): a TOML list
// of cases naming .npy inputs and expected outputs, and the comparison of
// a result with NumPy's values. See docs/development.md "Conformance".
#ifndef WEFT_TESTS_CONFORMANCE_CASE_IO_H_
#define WEFT_TESTS_CONFORMANCE_CASE_IO_H_

#include <toml++/toml.h>

#include <functional>
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

// The cases of |document| (a parsed cases.toml), in file order.
std::vector<Case> ReadCases(const toml::table& document);

// The tensor of |spec| in |dir| (bf16 files hold float32 values).
Expected<Tensor> LoadTensor(const std::string& dir, const IoSpec& spec);

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

// Registers one GoogleTest per op, suite.<op>, whose body is |run|(op).
void RegisterOpTests(const char* suite, const std::vector<std::string>& ops,
                     const std::function<void(const std::string&)>& run);

}  // namespace weft::cases

#endif  // WEFT_TESTS_CONFORMANCE_CASE_IO_H_
