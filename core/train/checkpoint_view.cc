#include "core/train/checkpoint_view.h"

namespace weft::train::internal {

Status CheckCompatible(const std::string& prefix, const checkpoint::BundleReader& reader, const TrainingGraph& tg) {
  std::vector<std::string> problems;
  const CheckpointView view(reader, tg);
  for (const std::string& name : tg.state) {
    DType saved_dtype = DType::kInvalid;
    Shape saved_shape;
    const bool found = view.Describe(name, &saved_dtype, &saved_shape);
    const Graph::Node* node = tg.graph.Find(name);
    const DType dtype = node->def.attrs.at("dtype").get<DType>();
    const Shape shape = node->def.attrs.at("shape").get<Shape>();
    if (!found) {
      problems.push_back(
          StrCat("the model's variable ", Quote(name), " (", Describe(dtype, shape), ") is not in the checkpoint"));
    } else if (saved_dtype != dtype || !shape.IsCompatibleWith(saved_shape)) {
      problems.push_back(StrCat("variable ", Quote(name), " is ", Describe(saved_dtype, saved_shape),
                                " in the checkpoint but ", Describe(dtype, shape), " in the model"));
    }
  }
  std::set<std::string> known(tg.state.begin(), tg.state.end());
  for (const checkpoint::TensorEntry& entry : reader.entries()) {
    if (!view.Used(entry.name, known)) {
      problems.push_back(StrCat("the checkpoint's tensor ", Quote(entry.name), " is not a variable of the model"));
    }
  }
  if (problems.empty()) return Status();
  const std::size_t shown = std::min<std::size_t>(problems.size(), 5);
  std::string text = StrCat("checkpoint ", prefix, " was not written for this model (or optimizer): ");
  for (std::size_t i = 0; i < shown; ++i) text += StrCat(i == 0 ? "" : "; ", problems[i]);
  if (problems.size() > shown) text += StrCat("; and ", problems.size() - shown, " more differences");
  return InvalidArgumentError(text);
}

int64_t MetaInt(const std::map<std::string, std::string>& meta, const std::string& key, int64_t fallback) {
  auto it = meta.find(key);
  if (it == meta.end()) return fallback;
  try {
    return std::stoll(it->second);
  } catch (...) {
    return fallback;
  }
}

}  // namespace weft::train::internal
