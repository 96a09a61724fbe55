#include "core/serving/servable.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include "core/base/logging.h"
#include "core/base/strings.h"
#include "core/graph/graph.h"
#include "core/graph/graph_walk.h"
#include "core/onnx/onnx.h"

namespace weft::serving {
namespace {

// Where each name of a signature points, and what the model calls it.
struct NamedEnds {
  std::vector<std::string> names;    // what clients use
  std::vector<std::string> tensors;  // graph tensors
};

// The same names for clients and in the graph.
NamedEnds SameNames(std::vector<std::string> names) { return {names, names}; }

// |wanted| (from config.toml) resolved against the model's own names
// (ONNX's) first, then the graph's tensors.
Expected<NamedEnds> Resolve(const std::vector<std::string>& wanted, const NamedEnds& model, const Graph& graph,
                            const char* what) {
  NamedEnds out;
  for (const std::string& name : wanted) {
    const auto it = std::find(model.names.begin(), model.names.end(), name);
    if (it != model.names.end()) {
      out.names.push_back(name);
      out.tensors.push_back(model.tensors[static_cast<std::size_t>(it - model.names.begin())]);
      continue;
    }
    auto end = graph.ResolveTensor(name);
    if (!end.ok()) return end.status().WithContext(StrCat("[signature] ", what));
    out.names.push_back(name);
    out.tensors.push_back(name);
  }
  return out;
}

Expected<TensorSpec> SpecOf(const Graph& graph, const std::string& name, const std::string& tensor) {
  WEFT_ASSIGN_OR_RETURN(Endpoint end, graph.ResolveTensor(tensor));
  const Graph::Node& node = graph.node(end.node);
  TensorSpec spec;
  spec.name = name;
  spec.tensor = tensor;
  spec.dtype = node.output_types[static_cast<std::size_t>(end.index)];
  spec.shape = node.output_shapes[static_cast<std::size_t>(end.index)];
  return spec;
}

// Batched when every input and output has rank >= 1 with dimension 0
// unknown: rows can then be stacked and split.
bool IsBatched(const Signature& sig) {
  auto leading_open = [](const TensorSpec& t) {
    return t.shape.unknown_rank() || (t.shape.rank() >= 1 && t.shape.dim(0) == Shape::kUnknownDim);
  };
  return !sig.inputs.empty() && std::all_of(sig.inputs.begin(), sig.inputs.end(), leading_open) &&
         std::all_of(sig.outputs.begin(), sig.outputs.end(), leading_open);
}

int SizeIndex(int64_t rows) {
  int i = 0;
  while ((int64_t{1} << (i + 1)) <= rows && i + 1 < 11) ++i;
  return i;
}

}  // namespace

Expected<std::unique_ptr<Servable>> Servable::Load(const std::string& model, int64_t version, const std::string& path,
                                                   const config::ModelServingConfig& config,
                                                   std::shared_ptr<runtime::DeviceSet> devices,
                                                   const runtime::SessionOptions& options, int narrow_threads) {
  std::unique_ptr<Servable> s(new Servable());
  s->model_ = model;
  s->version_ = version;
  s->path_ = path;
  NamedEnds model_inputs, model_outputs;
  GraphDef def;
  if (onnx_io::IsOnnxPath(path)) {
    onnx_io::ImportOptions import;
    import.freeze = true;
    WEFT_ASSIGN_OR_RETURN(onnx_io::ImportedModel m, onnx_io::ImportOnnxFile(path, import));
    model_inputs = {m.input_names, m.inputs};
    model_outputs = {m.output_names, m.outputs};
    def = std::move(m.def);
  } else {
    WEFT_ASSIGN_OR_RETURN(def, onnx_io::ReadModelFile(path));
  }
  auto graph = Graph::FromGraphDef(std::move(def));
  if (!graph.ok()) return graph.status().WithContext(path);
  if (model_outputs.names.empty()) model_outputs = SameNames(UnreadOutputs(*graph));
  NamedEnds outputs = model_outputs;
  if (!config.outputs.empty()) {
    WEFT_ASSIGN_OR_RETURN(outputs, Resolve(config.outputs, model_outputs, *graph, "outputs"));
  }
  if (outputs.names.empty()) return InvalidArgumentError(path, ": the model computes nothing to answer with");
  if (model_inputs.names.empty()) {
    std::vector<Endpoint> ends;
    for (const std::string& t : outputs.tensors) ends.push_back(*graph->ResolveTensor(t));
    model_inputs = SameNames(PlaceholdersFeeding(*graph, ends));
  }
  NamedEnds inputs = model_inputs;
  if (!config.inputs.empty()) {
    WEFT_ASSIGN_OR_RETURN(inputs, Resolve(config.inputs, model_inputs, *graph, "inputs"));
  }

  s->signature_.name = config.signature_name;
  for (std::size_t i = 0; i < inputs.names.size(); ++i) {
    WEFT_ASSIGN_OR_RETURN(TensorSpec spec, SpecOf(*graph, inputs.names[i], inputs.tensors[i]));
    s->signature_.inputs.push_back(std::move(spec));
  }
  for (std::size_t i = 0; i < outputs.names.size(); ++i) {
    WEFT_ASSIGN_OR_RETURN(TensorSpec spec, SpecOf(*graph, outputs.names[i], outputs.tensors[i]));
    s->signature_.outputs.push_back(std::move(spec));
  }
  s->signature_.batched = config.batching && IsBatched(s->signature_);
  for (const TensorSpec& t : s->signature_.inputs) s->feed_names_.push_back(t.tensor);
  for (const TensorSpec& t : s->signature_.outputs) s->fetch_names_.push_back(t.tensor);
  if (narrow_threads > 0) {
    runtime::SessionOptions narrow = options;
    narrow.intra_op_threads = narrow_threads;
    narrow.inter_op_threads = 1;
    WEFT_ASSIGN_OR_RETURN(s->narrow_, runtime::Session::Create(*graph, devices, narrow));
  }
  WEFT_ASSIGN_OR_RETURN(s->session_, runtime::Session::Create(std::move(*graph), std::move(devices), options));
  return s;
}

Status Servable::Run(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs, bool narrow) {
  std::vector<std::pair<std::string, Tensor>> feeds;
  feeds.reserve(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) feeds.emplace_back(feed_names_[i], inputs[i]);
  return (narrow && narrow_ != nullptr ? narrow_ : session_)->Run(feeds, fetch_names_, {}, outputs);
}

Status Servable::WarmUp(int64_t max_batch, bool all_sizes) {
  for (const TensorSpec& t : signature_.inputs) {
    if (t.shape.unknown_rank()) return Status();
    for (int d = signature_.batched ? 1 : 0; d < t.shape.rank(); ++d) {
      if (t.shape.dim(d) < 0) return Status();
    }
  }
  const int64_t top = signature_.batched ? std::max<int64_t>(1, max_batch) : 1;
  double cheapest_per_row = 0;
  int no_gain = 0;
  for (int64_t rows = 1; rows <= top && (all_sizes || no_gain < 2); rows *= 2) {
    std::vector<Tensor> inputs;
    for (const TensorSpec& t : signature_.inputs) {
      Shape shape = t.shape;
      if (signature_.batched) shape.set_dim(0, rows);
      WEFT_ASSIGN_OR_RETURN(Tensor zeros, Tensor::Zeros(t.dtype, shape));
      inputs.push_back(std::move(zeros));
    }
    // The first run of a size builds its executor; time the next ones.
    double fastest = 0;
    for (int run = 0; run < 4; ++run) {
      std::vector<Tensor> outputs;
      const auto start = std::chrono::steady_clock::now();
      WEFT_RETURN_IF_ERROR(Run(inputs, &outputs).WithContext(StrCat("warming up with a batch of ", rows)));
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (run > 0 && (fastest == 0 || seconds < fastest)) fastest = seconds;
    }
    RecordCost(rows, fastest);
    const double per_row = fastest / static_cast<double>(rows);
    if (cheapest_per_row == 0 || per_row < cheapest_per_row) {
      cheapest_per_row = per_row;
      no_gain = 0;
    } else {
      ++no_gain;
    }
    if (narrow_ != nullptr) {
      std::vector<Tensor> outputs;
      WEFT_RETURN_IF_ERROR(Run(inputs, &outputs, true).WithContext(StrCat("warming up with a batch of ", rows)));
    }
  }
  warmed_up_ = true;
  return Status();
}

void Servable::RecordCost(int64_t rows, double seconds) {
  if (rows < 1) return;
  const int i = SizeIndex(rows);
  // Scale a batch between two powers of two to the lower one's size.
  const double scaled = seconds * static_cast<double>(int64_t{1} << i) / static_cast<double>(rows);
  std::lock_guard<std::mutex> lock(cost_mutex_);
  double& c = cost_[static_cast<std::size_t>(i)];
  c = c == 0 ? scaled : 0.8 * c + 0.2 * scaled;
}

double Servable::CostOf(int64_t rows) const {
  if (rows < 1) return 0;
  std::lock_guard<std::mutex> lock(cost_mutex_);
  const int i = SizeIndex(rows);
  const double base = static_cast<double>(int64_t{1} << i);
  if (cost_[static_cast<std::size_t>(i)] > 0)
    return cost_[static_cast<std::size_t>(i)] * static_cast<double>(rows) / base;
  // The nearest measured size, scaled by rows.
  for (int d = 1; d < kSizes; ++d) {
    for (int j : {i - d, i + d}) {
      if (j < 0 || j >= kSizes || cost_[static_cast<std::size_t>(j)] <= 0) continue;
      return cost_[static_cast<std::size_t>(j)] * static_cast<double>(rows) / static_cast<double>(int64_t{1} << j);
    }
  }
  return 0;
}

int64_t Servable::EfficientBatchSize(int64_t cap) const {
  std::lock_guard<std::mutex> lock(cost_mutex_);
  int64_t best = 1;
  double best_per_row = 0;
  for (int i = 0; i < kSizes && (int64_t{1} << i) <= cap; ++i) {
    const double c = cost_[static_cast<std::size_t>(i)];
    if (c <= 0) break;
    const double per_row = c / static_cast<double>(int64_t{1} << i);
    if (best_per_row == 0 || per_row < 0.9 * best_per_row) {
      best = int64_t{1} << i;
      best_per_row = per_row;
    }
  }
  // Past the last size that still paid, one more doubling costs little
  // and absorbs bursts.
  return std::min(cap, best * 2);
}

}  // namespace weft::serving
