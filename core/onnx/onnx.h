// ONNX models in and out: import a .onnx file as a Weft graph, and export an
// inference graph back to ONNX. Built on ONNX's own C++ library (its
// protobuf model, checker and shape inference); see docs/onnx.md for the
// ops and opsets supported and what each error means.
//
//   ImportOptions options;
//   options.freeze = true;                       // initializers as constants
//   WEFT_ASSIGN_OR_RETURN(ImportedModel m, ImportOnnxFile("resnet18.onnx", options));
//   // m.def is an ordinary GraphDef: m.inputs are its Placeholders,
//   // m.outputs the Identity nodes named after the model's outputs.
//
// Without |freeze|, every floating-point initializer becomes a variable
// (VarHandle + ReadVariable) assigned its stored value by the NoOp m.init
// ("init"), so that the model can be trained; integer initializers (shapes,
// indices) are always constants.
#ifndef WEFT_CORE_ONNX_ONNX_H_
#define WEFT_CORE_ONNX_ONNX_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "core/graph/graph_def.h"

namespace weft::onnx_io {

// The ONNX opsets of the default domain the importer reads; the exporter
// writes kExportOpset. The converters know opsets kConvertedMinOpset and
// later; an older model is first brought to that opset by ONNX's own
// version converter (its operators' old forms: legacy broadcasting,
// consumed_inputs).
inline constexpr int64_t kMinOpset = 1;
inline constexpr int64_t kConvertedMinOpset = 7;
inline constexpr int64_t kMaxOpset = 17;
inline constexpr int64_t kExportOpset = 17;

struct ImportOptions {
  // Initializers become Const nodes instead of variables (inference only).
  bool freeze = false;
  // The name of the initialiser NoOp (without freeze).
  std::string init_name = "init";
  // Run convolutions, pooling and batch normalisation channels-last (NHWC,
  // where Weft's CPU kernels are fastest), keeping activations NHWC through
  // elementwise ops and transposing back only where an op needs ONNX's
  // NCHW. Off: every op runs on the NCHW tensors as ONNX has them.
  bool channels_last = true;
};

struct ImportedModel {
  GraphDef def;
  std::vector<std::string> inputs;   // Placeholder node names, in the model's order
  std::vector<std::string> outputs;  // node names of the model's outputs, in order
  // The model's own names of its inputs and outputs (ONNX allows names that
  // are not node names: "input.1"), in the same order.
  std::vector<std::string> input_names;
  std::vector<std::string> output_names;
  std::string init;       // the initialiser NoOp; "" when frozen or without initializers
  int64_t opset = 0;      // of the default domain
  std::string producer;   // "pytorch 1.13.1", or ""
  int64_t variables = 0;  // initializers made variables
};

// Reads and imports |path|; external data files are looked up next to it.
Expected<ImportedModel> ImportOnnxFile(const std::string& path, const ImportOptions& options = {});
// Imports a serialized ModelProto; |source| names it in messages and
// |base_dir| is where its external data files are.
Expected<ImportedModel> ImportOnnxBytes(std::string_view bytes, const std::string& source, const std::string& base_dir,
                                        const ImportOptions& options = {});

// True for a path ending in ".onnx".
bool IsOnnxPath(std::string_view path);

// A graph file of any kind Weft reads: .onnx is imported (with |options|),
// .wg and .wgt are read (see core/graph/serialize.h).
Expected<GraphDef> ReadModelFile(const std::string& path, const ImportOptions& options = {});

struct ExportOptions {
  // Graph outputs: "node" or "node:k" tensors. Empty: every node whose
  // outputs no other node reads (Placeholders and Consts excluded).
  std::vector<std::string> outputs;
  // The model's graph name.
  std::string graph_name = "weft";
  // Variables' values: the newest checkpoint of this directory (or this
  // bundle prefix). Without one, each variable takes the Const its
  // initialiser assigns (an imported, untrained model).
  std::string checkpoint;
};

struct ExportedModel {
  std::string bytes;                 // a serialized ModelProto, checked by ONNX's checker
  std::vector<std::string> inputs;   // graph inputs (the Placeholders the outputs need)
  std::vector<std::string> outputs;  // graph outputs
  int64_t initializers = 0;
};

// Exports the part of |def| that computes |options.outputs| as an ONNX
// opset-17 model. Variables must have been frozen (see FreezeVariables) or
// be read from Consts assigned by an initialiser; ops without an ONNX
// mapping are listed in one error.
Expected<ExportedModel> ExportOnnx(const GraphDef& def, const ExportOptions& options = {});
// ExportOnnx, then writes the model to |path| atomically.
Expected<ExportedModel> ExportOnnxFile(const GraphDef& def, const std::string& path, const ExportOptions& options = {});

}  // namespace weft::onnx_io

#endif  // WEFT_CORE_ONNX_ONNX_H_
