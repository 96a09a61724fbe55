#include "core/runtime/kernels/checkpoint_kernels.h"

#include "core/checkpoint/bundle.h"

namespace weft::runtime {
namespace {

Expected<std::string> Prefix(const OpKernelContext& ctx) {
  WEFT_ASSIGN_OR_RETURN(Tensor prefix, ctx.device().CopyToHost(ctx.input(0)));
  if (prefix.dtype() != DType::kString || prefix.num_elements() != 1) {
    return InvalidArgumentError("prefix must be a string scalar, got ", prefix.TypeString());
  }
  if (prefix.string_at(0).empty()) return InvalidArgumentError("the checkpoint prefix is empty");
  return std::string(prefix.string_at(0));
}

// Inputs 1.. of a save, named by |names| and copied to the host.
Expected<std::vector<std::pair<std::string, Tensor>>> HostInputs(const OpKernelContext& ctx,
                                                                 const std::vector<std::string>& names,
                                                                 const std::string& prefix) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (std::size_t i = 0; i < names.size(); ++i) {
    auto host = ctx.device().CopyToHost(ctx.input(static_cast<int>(i) + 1));
    if (!host.ok()) {
      return host.status().WithContext(
          StrCat("checkpoint ", prefix, ": copying tensor ", Quote(names[i]), " to the host"));
    }
    tensors.emplace_back(names[i], std::move(*host));
  }
  return tensors;
}

class SaveKernel : public OpKernel {
 public:
  explicit SaveKernel(std::vector<std::string> names) : names_(std::move(names)) {}

  Status Compute(OpKernelContext& ctx) override {
    WEFT_ASSIGN_OR_RETURN(std::string prefix, Prefix(ctx));
    WEFT_ASSIGN_OR_RETURN(auto tensors, HostInputs(ctx, names_, prefix));
    return checkpoint::WriteBundle(prefix, tensors, {});
  }

 private:
  std::vector<std::string> names_;
};

class SaveShardKernel : public OpKernel {
 public:
  SaveShardKernel(std::vector<std::string> names, int shard, int num_shards)
      : names_(std::move(names)), shard_(shard), num_shards_(num_shards) {}

  Status Compute(OpKernelContext& ctx) override {
    WEFT_ASSIGN_OR_RETURN(std::string prefix, Prefix(ctx));
    WEFT_ASSIGN_OR_RETURN(auto tensors, HostInputs(ctx, names_, prefix));
    WEFT_ASSIGN_OR_RETURN(checkpoint::BundleIndex part,
                          checkpoint::WriteDataShard(prefix, shard_, num_shards_, tensors));
    ctx.set_output(0, Tensor::Strings({checkpoint::EncodeIndexPart(part)}, Shape{}));
    return Status();
  }

 private:
  std::vector<std::string> names_;
  int shard_;
  int num_shards_;
};

class RestoreKernel : public OpKernel {
 public:
  RestoreKernel(std::vector<std::string> names, std::vector<DType> dtypes, std::vector<Shape> shapes)
      : names_(std::move(names)), dtypes_(std::move(dtypes)), shapes_(std::move(shapes)) {}

  Status Compute(OpKernelContext& ctx) override {
    WEFT_ASSIGN_OR_RETURN(std::string prefix, Prefix(ctx));
    WEFT_ASSIGN_OR_RETURN(auto reader, checkpoint::BundleReader::Open(prefix));
    // Every tensor is checked against the graph before any is read, so a
    // mismatch is reported before minutes of I/O.
    for (std::size_t i = 0; i < names_.size(); ++i) {
      const checkpoint::TensorEntry* e = reader->Find(names_[i]);
      if (e == nullptr) return reader->Read(names_[i]).status();
      if (e->dtype != dtypes_[i]) {
        return InvalidArgumentError("checkpoint ", prefix, ": tensor ", Quote(e->name), " is ", DTypeName(e->dtype),
                                    ", the graph expects ", DTypeName(dtypes_[i]));
      }
      if (!shapes_.empty() && !shapes_[i].IsCompatibleWith(e->shape)) {
        return InvalidArgumentError("checkpoint ", prefix, ": tensor ", Quote(e->name), " has shape ",
                                    e->shape.ToString(), ", the graph expects ", shapes_[i].ToString());
      }
    }
    for (std::size_t i = 0; i < names_.size(); ++i) {
      WEFT_ASSIGN_OR_RETURN(Tensor host, reader->Read(names_[i]));
      WEFT_ASSIGN_OR_RETURN(Tensor value, ctx.device().CopyFromHost(host));
      ctx.set_output(static_cast<int>(i), std::move(value));
    }
    return Status();
  }

 private:
  std::vector<std::string> names_;
  std::vector<DType> dtypes_;
  std::vector<Shape> shapes_;
};

template <class T>
const T& Attr(const Graph::Node& node, const char* name) {
  return node.def.attrs.find(name)->second.get<T>();
}

}  // namespace

Expected<std::unique_ptr<OpKernel>> CreateCheckpointKernel(const Graph::Node& node) {
  // The graph checked the attrs against the op definitions (io_ops.cc).
  auto names = Attr<std::vector<std::string>>(node, "tensor_names");
  if (node.op_name() == "Save") return std::unique_ptr<OpKernel>(new SaveKernel(std::move(names)));
  if (node.op_name() == "SaveShard") {
    return std::unique_ptr<OpKernel>(new SaveShardKernel(std::move(names),
                                                         static_cast<int>(Attr<int64_t>(node, "shard")),
                                                         static_cast<int>(Attr<int64_t>(node, "num_shards"))));
  }
  if (node.op_name() == "Restore") {
    return std::unique_ptr<OpKernel>(new RestoreKernel(std::move(names), Attr<std::vector<DType>>(node, "dtypes"),
                                                       Attr<std::vector<Shape>>(node, "shapes")));
  }
  return InternalError("no checkpoint kernel for ", node.op_name());
}

}  // namespace weft::runtime
