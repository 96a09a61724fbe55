// The inference path behind the C API (capi/include/weft/weft_inference.h)
// and `weft run`: a model is a checked graph with named inputs and outputs,
// a session runs it in this process with feeds checked against them
// (docs/embedding.md). The C functions in weft_inference.cc convert their
// arguments and call these; the CLI calls them directly, so everything that
// tests `weft run` tests this path too.
#ifndef WEFT_CAPI_INFERENCE_H_
#define WEFT_CAPI_INFERENCE_H_

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/status.h"
#include "core/config/config.h"
#include "core/graph/graph.h"
#include "core/graph/serialize.h"
#include "core/runtime/session.h"
#include "core/tensor/tensor.h"

namespace weft::plugin {
class PluginHost;
}
namespace weft::onnx_io {
struct ImportedModel;
}

namespace weft::inference {

// One input or output: the name callers use, the graph tensor behind it,
// and what it holds (rank -1: unknown).
struct Port {
  std::string name;
  std::string tensor;
  DType dtype = DType::kInvalid;
  int32_t rank = -1;
  std::vector<int64_t> dims;
};

class Model {
 public:
  // A .wg, .wgt or .onnx file (an .onnx model imported frozen unless
  // |freeze| is false, when its trained weights stay variables). |reading|
  // says whether a .wg file's weights are copied or used in place in a
  // mapping of the file (core/graph/serialize.h).
  static Expected<Model> Load(const std::string& path, bool freeze = true,
                              TensorReading reading = TensorReading::kCopy);
  // The same inputs and outputs over |graph|, which has the model's nodes
  // and more (weft run's restore ops).
  Expected<Model> WithGraph(Graph graph) const;
  // The bytes of a model in |format|: "wg", "wgt" or "onnx".
  static Expected<Model> FromMemory(std::string_view bytes, std::string_view format);
  // A graph already checked; |source| names it in messages.
  static Expected<Model> FromGraph(std::string source, Graph graph);

  const std::string& source() const { return source_; }
  const Graph& graph() const { return graph_; }
  const std::vector<Port>& inputs() const { return inputs_; }
  const std::vector<Port>& outputs() const { return outputs_; }

 private:
  static Expected<Model> Make(std::string source, Graph graph, std::vector<std::string> input_names,
                              std::vector<std::string> input_tensors, std::vector<std::string> output_names,
                              std::vector<std::string> output_tensors);
  // An imported ONNX model, with ONNX's names for its inputs and outputs.
  static Expected<Model> FromOnnx(onnx_io::ImportedModel m, std::string source);

  std::string source_;
  Graph graph_;
  std::vector<Port> inputs_;
  std::vector<Port> outputs_;
};

// What a session is made with.
struct SessionSettings {
  config::Config config;                  // the plugins to load and their sections
  runtime::SessionOptions session;        // threads, placement, optimizer level
  std::vector<std::string> plugin_paths;  // searched before the config's
  std::string device;                     // a device type to prefer; empty: the config's order
  // Whether feeds and fetches may name any tensor of the graph besides the
  // model's inputs and outputs (`weft run`), or only those (the C API).
  bool any_tensor = false;

  // The embedded default config's settings (the lite build: Config's own,
  // optimizer level 0).
  static Expected<SessionSettings> Defaults();
};

class Session {
 public:
  // A session over |model|. With |host| (the CLI's, already loaded), its
  // plugins are used and it must outlive the session; without, the session
  // loads the settings' plugins itself.
  static Expected<std::unique_ptr<Session>> Create(const Model& model, const SessionSettings& settings,
                                                   plugin::PluginHost* host = nullptr);
  ~Session();

  // Runs one step: |feeds| and |fetches| by input and output name (or, with
  // any_tensor, by tensor name), |targets| by node name. A feed is checked
  // against its input's dtype and shape.
  Status Run(const std::vector<std::pair<std::string, Tensor>>& feeds, const std::vector<std::string>& fetches,
             const std::vector<std::string>& targets, std::vector<Tensor>* outputs,
             const runtime::RunOptions& options = {});

  const std::string& source() const { return source_; }
  const std::vector<Port>& inputs() const { return inputs_; }
  const std::vector<Port>& outputs() const { return outputs_; }
  const Port* FindInput(std::string_view name) const;
  const Port* FindOutput(std::string_view name) const;

 private:
  Session() = default;
  Status Resolve(const std::vector<std::pair<std::string, Tensor>>& feeds, const std::vector<std::string>& fetches,
                 std::vector<std::pair<std::string, Tensor>>* tensors, std::vector<std::string>* names) const;

  std::string source_;
  bool any_tensor_ = false;
  std::unique_ptr<plugin::PluginHost> owned_host_;
  std::unique_ptr<runtime::Session> session_;
  std::vector<Port> inputs_;
  std::vector<Port> outputs_;
};

// "'a', 'b'" for messages, or "none".
std::string PortNames(const std::vector<Port>& ports);

// Whether a value of |dtype| and |shape| fits |port|: its dtype, and its
// shape where the model knows it.
Status CheckFeed(const Port& port, DType dtype, const Shape& shape);

}  // namespace weft::inference

#endif  // WEFT_CAPI_INFERENCE_H_
