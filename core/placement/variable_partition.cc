#include "core/placement/variable_partition.h"

#include <map>
#include <set>

#include "core/base/strings.h"

namespace weft::dist {
namespace {

// Builds the nodes that replace the uses of one partitioned variable.
class Rewriter {
 public:
  Rewriter(const PartitionedVariable& v, const std::string& local_device) : v_(v), device_(local_device) {}

  std::vector<NodeDef> nodes;

  NodeDef& Add(std::string name, std::string op, std::vector<std::string> inputs, AttrMap attrs = {},
               std::string device = {}) {
    NodeDef n;
    n.name = std::move(name);
    n.op = std::move(op);
    n.inputs = std::move(inputs);
    n.attrs = std::move(attrs);
    n.device = std::move(device);
    nodes.push_back(std::move(n));
    return nodes.back();
  }
  std::string Const(const std::string& name, Tensor t) {
    const DType dtype = t.dtype();
    Add(name, "Const", {}, {{"value", AttrValue(std::move(t))}, {"dtype", AttrValue(dtype)}}, device_);
    return name;
  }
  int parts() const { return static_cast<int>(v_.parts.size()); }
  const std::string& part(int k) const { return v_.parts[static_cast<std::size_t>(k)].name; }

  // The handle itself: one VarHandle per part.
  void Handles(const NodeDef& handle) {
    for (const VariablePart& p : v_.parts) {
      std::vector<int64_t> dims = v_.shape.dims();
      dims[0] = p.rows;
      AttrMap attrs = handle.attrs;
      attrs["shape"] = AttrValue(Shape(dims));
      if (auto it = attrs.find("shared_name");
          it != attrs.end() && it->second.holds<std::string>() && !it->second.get<std::string>().empty()) {
        it->second = AttrValue(StrCat(it->second.get<std::string>(), "/part_", p.index));
      }
      Add(p.name, "VarHandle", Controls(handle), std::move(attrs), handle.device);
    }
  }

  // ReadVariable(V) -> Concat(ReadVariable(V/part_k)), axis 0.
  void Read(const NodeDef& read) {
    std::vector<std::string> inputs;
    for (int k = 0; k < parts(); ++k) {
      Add(StrCat(read.name, "/part_", k), "ReadVariable", {part(k)}, read.attrs);
      inputs.push_back(StrCat(read.name, "/part_", k));
    }
    for (const std::string& c : Controls(read)) inputs.push_back(c);
    Add(read.name, "Concat", std::move(inputs),
        {{"axis", AttrValue(int64_t{0})}, {"N", AttrValue(static_cast<int64_t>(parts()))}},
        read.device.empty() ? device_ : read.device);
  }

  // ResourceGather(V, ids) -> the ids split by part, one gather per part,
  // the rows stitched back and shaped like ids + row.
  void Gather(const NodeDef& gather, const std::string& ids) {
    const std::string s = StrCat(gather.name, "/partitioned/");
    const std::string dev = gather.device.empty() ? device_ : gather.device;
    std::string flat = s + "ids";
    Add(flat, "Reshape", {ids, Const(s + "flat_shape", Tensor::FromVector<int64_t>({-1}))}, {}, dev);
    const auto tindices = gather.attrs.find("Tindices");
    if (tindices == gather.attrs.end() || !tindices->second.holds<DType>() ||
        tindices->second.get<DType>() != DType::kI64) {
      Add(s + "ids64", "Cast", {flat}, {{"DstT", AttrValue(DType::kI64)}}, dev);
      flat = s + "ids64";
    }
    // Each distinct id once: a row read twice in a batch moves once.
    Add(s + "unique", "Unique", {flat}, {{"out_idx", AttrValue(DType::kI32)}}, dev);
    const std::string repeat = InputRefString(s + "unique", 1);
    flat = s + "unique";
    // part(id) = the number of part boundaries at or below id.
    std::vector<int64_t> offsets, bounds;
    for (const VariablePart& p : v_.parts) offsets.push_back(p.offset);
    bounds.assign(offsets.begin() + 1, offsets.end());
    Add(s + "ids_column", "ExpandDims", {flat}, {{"axis", AttrValue(int64_t{-1})}}, dev);
    Add(s + "past", "GreaterEqual", {s + "ids_column", Const(s + "bounds", Tensor::FromVector<int64_t>(bounds))}, {},
        dev);
    Add(s + "past_i32", "Cast", {s + "past"}, {{"DstT", AttrValue(DType::kI32)}}, dev);
    Add(s + "part", "Sum", {s + "past_i32"},
        {{"axis", AttrValue(std::vector<int64_t>{1})}, {"keep_dims", AttrValue(false)}}, dev);
    Add(s + "base", "Gather", {Const(s + "offsets", Tensor::FromVector<int64_t>(offsets)), s + "part"}, {}, dev);
    Add(s + "local", "Sub", {flat, s + "base"}, {}, dev);
    const AttrMap n_parts = {{"num_partitions", AttrValue(static_cast<int64_t>(parts()))}};
    Add(s + "local_ids", "DynamicPartition", {s + "local", s + "part"}, n_parts, dev);
    Add(s + "count", "Size", {flat}, {{"out_type", AttrValue(DType::kI32)}}, dev);
    Add(s + "positions", "Range",
        {Const(s + "zero", Tensor::Scalar<int32_t>(0)), s + "count", Const(s + "one", Tensor::Scalar<int32_t>(1))}, {},
        dev);
    Add(s + "routed_positions", "DynamicPartition", {s + "positions", s + "part"}, n_parts, dev);
    std::vector<std::string> stitch;
    for (int k = 0; k < parts(); ++k) stitch.push_back(InputRefString(s + "routed_positions", k));
    for (int k = 0; k < parts(); ++k) {
      // On the part's task (it takes the part's handle): only its rows come back.
      AttrMap attrs = gather.attrs;
      attrs["Tindices"] = AttrValue(DType::kI64);
      Add(StrCat(s, "part_", k), "ResourceGather", {part(k), InputRefString(s + "local_ids", k)}, std::move(attrs));
      stitch.push_back(StrCat(s, "part_", k));
    }
    Add(s + "unique_rows", "DynamicStitch", std::move(stitch), {{"N", AttrValue(static_cast<int64_t>(parts()))}}, dev);
    Add(s + "rows", "Gather", {s + "unique_rows", repeat}, {}, dev);
    // Shaped like ids + row.
    std::string shape = s + "ids_shape";
    Add(shape, "Shape", {ids}, {{"out_type", AttrValue(DType::kI64)}}, dev);
    if (v_.shape.rank() > 1) {
      const std::vector<int64_t> row(v_.shape.dims().begin() + 1, v_.shape.dims().end());
      Add(s + "shape", "Concat", {shape, Const(s + "row_shape", Tensor::FromVector<int64_t>(row))},
          {{"axis", AttrValue(int64_t{0})}, {"N", AttrValue(int64_t{2})}}, dev);
      shape = s + "shape";
    }
    std::vector<std::string> inputs = {s + "rows", shape};
    for (const std::string& c : Controls(gather)) inputs.push_back(c);
    Add(gather.name, "Reshape", std::move(inputs), {}, dev);
  }

  // Assign(V, value) -> Assign(V/part_k, value[offset_k : offset_k + rows_k]);
  // the original name runs after all of them.
  void Assign(const NodeDef& assign, const std::string& value) {
    std::vector<std::string> after = Controls(assign);
    for (int k = 0; k < parts(); ++k) {
      const VariablePart& p = v_.parts[static_cast<std::size_t>(k)];
      std::vector<int64_t> begin(static_cast<std::size_t>(v_.shape.rank()), 0);
      std::vector<int64_t> size(static_cast<std::size_t>(v_.shape.rank()), -1);
      begin[0] = p.offset;
      size[0] = p.rows;
      const std::string slice = StrCat(assign.name, "/part_", k, "/value");
      Add(slice, "Slice", {value}, {{"begin", AttrValue(begin)}, {"size", AttrValue(size)}});
      Add(StrCat(assign.name, "/part_", k), "Assign", {part(k), slice}, assign.attrs);
      after.push_back(StrCat("^", assign.name, "/part_", k));
    }
    Add(assign.name, "NoOp", std::move(after), {}, assign.device);
  }

  // VarIsInitialized(V) -> every part's, and-ed.
  void IsInitialized(const NodeDef& node) {
    std::string all;
    for (int k = 0; k < parts(); ++k) {
      const std::string one = StrCat(node.name, "/part_", k);
      Add(one, "VarIsInitialized", {part(k)}, node.attrs);
      if (k == 0) {
        all = one;
        continue;
      }
      const std::string name = k + 1 == parts() ? node.name : StrCat(node.name, "/and_", k);
      std::vector<std::string> inputs = {all, one};
      if (k + 1 == parts()) {
        for (const std::string& c : Controls(node)) inputs.push_back(c);
      }
      Add(name, "LogicalAnd", std::move(inputs), {}, node.device);
      all = name;
    }
  }

  // |node|'s control inputs, with one on V made one on every part.
  std::vector<std::string> Controls(const NodeDef& node) const {
    std::vector<std::string> out;
    for (const std::string& in : node.inputs) {
      if (in.empty() || in[0] != '^') continue;
      if (in.substr(1) == v_.name) {
        for (const VariablePart& p : v_.parts) out.push_back("^" + p.name);
      } else {
        out.push_back(in);
      }
    }
    return out;
  }

 private:
  const PartitionedVariable& v_;
  const std::string& device_;
};

}  // namespace

std::vector<VariablePart> SplitRows(const std::string& name, int64_t rows, int parts) {
  std::vector<VariablePart> out;
  const int64_t base = rows / parts, extra = rows % parts;
  int64_t offset = 0;
  for (int k = 0; k < parts; ++k) {
    VariablePart p;
    p.name = StrCat(name, "/part_", k);
    p.index = k;
    p.offset = offset;
    p.rows = base + (k < extra ? 1 : 0);
    offset += p.rows;
    out.push_back(std::move(p));
  }
  return out;
}

Expected<PartitionedModel> PartitionVariables(const Graph& model, int num_parts, int64_t threshold_bytes,
                                              const std::string& local_device) {
  PartitionedModel out;
  GraphDef def = model.ToGraphDef();
  std::map<std::string, std::size_t> split;  // variable -> index in out.variables
  if (num_parts >= 2) {
    for (const NodeDef& node : def.nodes) {
      if (node.op != "VarHandle") continue;
      const Shape shape = node.attrs.at("shape").get<Shape>();
      const DType dtype = node.attrs.at("dtype").get<DType>();
      if (!shape.IsFullyDefined() || shape.rank() < 1 || shape.dim(0) < 2) continue;
      const int64_t bytes = shape.num_elements() * static_cast<int64_t>(DTypeSize(dtype));
      if (bytes <= threshold_bytes) continue;
      const int parts = static_cast<int>(std::min<int64_t>(num_parts, shape.dim(0)));
      split[node.name] = out.variables.size();
      out.variables.push_back({node.name, shape, dtype, SplitRows(node.name, shape.dim(0), parts)});
    }
  }
  if (split.empty()) {
    out.graph = model;
    return out;
  }
  // Every use of a split variable's handle must be one the rewrite knows.
  std::vector<NodeDef> nodes;
  for (const NodeDef& node : def.nodes) {
    if (auto it = split.find(node.name); it != split.end()) {
      Rewriter r(out.variables[it->second], local_device);
      r.Handles(node);
      for (NodeDef& n : r.nodes) nodes.push_back(std::move(n));
      continue;
    }
    const PartitionedVariable* v = nullptr;
    int position = -1;
    for (std::size_t i = 0; i < node.inputs.size(); ++i) {
      if (node.inputs[i].empty() || node.inputs[i][0] == '^') continue;
      WEFT_ASSIGN_OR_RETURN(InputRef ref, ParseInputRef(node.inputs[i]));
      if (auto it = split.find(ref.node); it != split.end()) {
        v = &out.variables[it->second];
        position = static_cast<int>(i);
        break;
      }
    }
    bool control_only = false;
    if (v == nullptr) {
      for (const std::string& in : node.inputs) {
        if (!in.empty() && in[0] == '^' && split.count(in.substr(1)) != 0) {
          v = &out.variables[split[in.substr(1)]];
          control_only = true;
        }
      }
    }
    if (v == nullptr) {
      nodes.push_back(node);
      continue;
    }
    Rewriter r(*v, local_device);
    const bool first = position == 0;
    if (control_only) {
      NodeDef copy = node;
      std::vector<std::string> inputs;
      for (const std::string& in : node.inputs) {
        if (!in.empty() && in[0] == '^') continue;
        inputs.push_back(in);
      }
      for (const std::string& c : r.Controls(node)) inputs.push_back(c);
      copy.inputs = std::move(inputs);
      nodes.push_back(std::move(copy));
      continue;
    } else if (first && node.op == "ReadVariable") {
      r.Read(node);
    } else if (first && node.op == "ResourceGather" && node.inputs.size() >= 2) {
      r.Gather(node, node.inputs[1]);
    } else if (first && node.op == "Assign" && node.inputs.size() >= 2) {
      r.Assign(node, node.inputs[1]);
    } else if (first && node.op == "VarIsInitialized") {
      r.IsInitialized(node);
    } else {
      return InvalidArgumentError("node ", Quote(node.name), " (", node.op, ") uses variable ", Quote(v->name), " (",
                                  DTypeName(v->dtype), v->shape.ToString(), ", ",
                                  HumanBytes(static_cast<uint64_t>(v->shape.num_elements()) * DTypeSize(v->dtype)),
                                  "), which is large enough to be split across the ps tasks, but only "
                                  "ReadVariable, ResourceGather, Assign and VarIsInitialized can use a split "
                                  "variable; raise [cluster] partition_mb above its size to keep it whole");
    }
    for (NodeDef& n : r.nodes) nodes.push_back(std::move(n));
  }
  def.nodes = std::move(nodes);
  auto graph = Graph::FromGraphDef(std::move(def));
  if (!graph.ok()) return graph.status().WithContext("splitting the variables larger than [cluster] partition_mb");
  out.graph = std::move(*graph);
  return out;
}

PartName ParsePartName(const std::string& name) {
  std::size_t at = 0;
  while ((at = name.find("/part_", at)) != std::string::npos) {
    std::size_t end = at + 6;
    std::size_t digits = end;
    while (digits < name.size() && name[digits] >= '0' && name[digits] <= '9') ++digits;
    // At most 9 digits: a part number fits an int (a longer one is not a part).
    if (digits > end && digits - end <= 9 && (digits == name.size() || name[digits] == '/')) {
      return {name.substr(0, at) + name.substr(digits), std::stoi(name.substr(end, digits - end))};
    }
    at = end;
  }
  return {name, -1};
}

}  // namespace weft::dist
