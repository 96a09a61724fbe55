// A checkpoint as the training graph's state reads it, whole or split
// across ps tasks in any number of parts (docs/training.md,
// "Checkpoints"). Internal to core/train.
#pragma once

#include <map>
#include <set>
#include <string>

#include "core/checkpoint/bundle.h"
#include "core/placement/variable_partition.h"
#include "core/train/run_support.h"
#include "core/train/training_graph.h"

namespace weft::train::internal {

inline std::string Describe(DType dtype, const Shape& shape) { return StrCat(DTypeName(dtype), shape.ToString()); }

// A checkpoint as the graph's state reads it. A variable split across ps
// tasks is saved as its parts ("emb/part_0", "emb/part_1/adam/m"); the
// graph may want it whole (one process), split the same way, or split in
// another number of parts: the parts are joined along dimension 0 and cut
// again as SplitRows cuts them (core/placement/variable_partition.h).
class CheckpointView {
 public:
  CheckpointView(const checkpoint::BundleReader& reader, const TrainingGraph& tg) : reader_(reader) {
    for (const checkpoint::TensorEntry& e : reader.entries()) {
      const dist::PartName pn = dist::ParsePartName(e.name);
      if (pn.part >= 0) saved_parts_[pn.whole][pn.part] = &e;
    }
    for (const std::string& name : tg.state) {
      const dist::PartName pn = dist::ParsePartName(name);
      if (pn.part >= 0) ++wanted_parts_[pn.whole];
    }
  }

  // The dtype and shape |name| would read as; false when the checkpoint
  // has nothing for it.
  bool Describe(const std::string& name, DType* dtype, Shape* shape) const {
    if (const checkpoint::TensorEntry* e = reader_.Find(name)) {
      *dtype = e->dtype;
      *shape = e->shape;
      return true;
    }
    const dist::PartName pn = dist::ParsePartName(name);
    if (!WholeShape(pn.whole, dtype, shape)) return false;
    if (pn.part < 0) return true;
    if (shape->rank() < 1) return false;
    const auto parts = dist::SplitRows(pn.whole, shape->dim(0), wanted_parts_.at(pn.whole));
    if (pn.part >= static_cast<int>(parts.size())) return false;
    std::vector<int64_t> dims = shape->dims();
    dims[0] = parts[static_cast<std::size_t>(pn.part)].rows;
    *shape = Shape(dims);
    return true;
  }

  // Whether the checkpoint's tensor |name| has a variable of the graph to
  // go to (itself, or the whole or parts of its variable).
  bool Used(const std::string& name, const std::set<std::string>& state) const {
    if (state.count(name) != 0) return true;
    const dist::PartName pn = dist::ParsePartName(name);
    return pn.part >= 0 && (state.count(pn.whole) != 0 || wanted_parts_.count(pn.whole) != 0);
  }

  Expected<Tensor> Read(const std::string& name) const {
    if (reader_.Find(name) != nullptr) return reader_.Read(name);
    const dist::PartName pn = dist::ParsePartName(name);
    WEFT_ASSIGN_OR_RETURN(Tensor whole, ReadWhole(pn.whole));
    if (pn.part < 0) return whole;
    const auto parts = dist::SplitRows(pn.whole, whole.dim(0), wanted_parts_.at(pn.whole));
    const dist::VariablePart& part = parts[static_cast<std::size_t>(pn.part)];
    std::vector<int64_t> dims = whole.shape().dims();
    dims[0] = part.rows;
    WEFT_ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(whole.dtype(), Shape(dims)));
    const uint64_t row = whole.dim(0) == 0 ? 0 : whole.byte_size() / static_cast<uint64_t>(whole.dim(0));
    std::memcpy(out.raw_data(), static_cast<const char*>(whole.raw_data()) + row * static_cast<uint64_t>(part.offset),
                row * static_cast<uint64_t>(part.rows));
    return out;
  }

 private:
  bool WholeShape(const std::string& whole, DType* dtype, Shape* shape) const {
    if (const checkpoint::TensorEntry* e = reader_.Find(whole)) {
      *dtype = e->dtype;
      *shape = e->shape;
      return true;
    }
    auto it = saved_parts_.find(whole);
    if (it == saved_parts_.end() || it->second.empty()) return false;
    int64_t rows = 0;
    int expect = 0;
    const checkpoint::TensorEntry* first = it->second.begin()->second;
    for (const auto& [k, e] : it->second) {
      if (k != expect++ || e->shape.rank() < 1 || !e->shape.IsFullyDefined()) return false;  // a part missing
      // Parts of one variable: one dtype, rows of one shape.
      if (e->dtype != first->dtype || e->shape.rank() != first->shape.rank()) return false;
      for (int d = 1; d < e->shape.rank(); ++d) {
        if (e->shape.dim(d) != first->shape.dim(d)) return false;
      }
      rows += e->shape.dim(0);
      *dtype = e->dtype;
      *shape = e->shape;
    }
    std::vector<int64_t> dims = shape->dims();
    dims[0] = rows;
    *shape = Shape(dims);
    return true;
  }

  Expected<Tensor> ReadWhole(const std::string& whole) const {
    if (reader_.Find(whole) != nullptr) return reader_.Read(whole);
    DType dtype = DType::kInvalid;
    Shape shape;
    if (!WholeShape(whole, &dtype, &shape)) {
      return NotFoundError("checkpoint ", reader_.prefix(), " has neither ", Quote(whole), " nor all of its parts");
    }
    WEFT_ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(dtype, shape));
    uint64_t at = 0;
    for (const auto& [k, e] : saved_parts_.at(whole)) {
      WEFT_ASSIGN_OR_RETURN(Tensor part, reader_.Read(e->name));
      std::memcpy(static_cast<char*>(out.raw_data()) + at, part.raw_data(), part.byte_size());
      at += part.byte_size();
    }
    return out;
  }

  const checkpoint::BundleReader& reader_;
  std::map<std::string, std::map<int, const checkpoint::TensorEntry*>> saved_parts_;
  std::map<std::string, int> wanted_parts_;
};

// What differs between the checkpoint at |prefix| and the training
// graph's state, or OK.
Status CheckCompatible(const std::string& prefix, const checkpoint::BundleReader& reader, const TrainingGraph& tg);

// An integer of a checkpoint's metadata, or |fallback|.
int64_t MetaInt(const std::map<std::string, std::string>& meta, const std::string& key, int64_t fallback);

}  // namespace weft::train::internal
