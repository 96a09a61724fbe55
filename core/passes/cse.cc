// Common subexpression elimination: two nodes with the same op, attrs,
// inputs, control inputs and requested device compute the same value, so
// the later one's readers read the earlier one (docs/optimizer.md). Stateful
// nodes (variables, random ops, queues) and control flow never merge.
#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "core/base/hash.h"
#include "core/base/strings.h"
#include "core/passes/passes_internal.h"

namespace weft::passes::internal {
namespace {

uint64_t Mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull + (h >> 29); }

// A cheap fingerprint of a constant: dtype, shape and up to 256 bytes of
// each end (equal fingerprints are then compared in full).
uint64_t Fingerprint(const Tensor& t) {
  uint64_t h = Fnv1aHash(t.TypeString());
  if (!t.host_visible() || t.dtype() == DType::kString) return h;
  const uint64_t size = t.byte_size();
  const char* p = static_cast<const char*>(t.raw_data());
  if (p == nullptr) return h;
  const uint64_t head = std::min<uint64_t>(size, 256);
  h = Mix(h, Fnv1aHash(std::string_view(p, head)));
  if (size > 256) h = Mix(h, Fnv1aHash(std::string_view(p + size - 256, 256)));
  return h;
}

}  // namespace

Expected<int64_t> EliminateCommonSubexpressions(GraphEditor& edit, const PassContext& context, const OptimizeOptions&,
                                                PassReport& report) {
  const Graph& g = edit.graph();
  const std::size_t n = static_cast<std::size_t>(g.num_nodes());
  // What each node became: itself, or the earlier node it equals.
  std::vector<int> same(n);
  for (std::size_t i = 0; i < n; ++i) same[i] = static_cast<int>(i);
  std::unordered_map<uint64_t, std::vector<int>> buckets;
  int64_t changed = 0;

  auto inputs_of = [&](const Graph::Node& node) {
    std::vector<Endpoint> data;
    for (const Endpoint& e : node.inputs) data.push_back({same[static_cast<std::size_t>(e.node)], e.index});
    std::vector<int> control;
    for (int c : node.control_inputs) control.push_back(same[static_cast<std::size_t>(c)]);
    std::sort(control.begin(), control.end());
    control.erase(std::unique(control.begin(), control.end()), control.end());
    return std::make_pair(data, control);
  };

  std::vector<std::string> device(n);
  for (std::size_t i = 0; i < n; ++i) {
    const NodeDef& def = g.node(static_cast<int>(i)).def;
    device[i] = context.requested_device ? context.requested_device(def) : def.device;
  }
  for (int id : g.topological_order()) {
    const Graph::Node& node = g.node(id);
    const bool is_const = ConstValue(node) != nullptr;
    if (!is_const && (!IsRewritable(node) || node.op_name() == "Placeholder")) continue;
    if (node.num_outputs() == 0 || context.keep.contains(node.name())) continue;
    const auto [data, control] = inputs_of(node);
    uint64_t h = Fnv1aHash(node.op_name());
    h = Mix(h, Fnv1aHash(device[static_cast<std::size_t>(id)]));
    for (const Endpoint& e : data) h = Mix(h, static_cast<uint64_t>(e.node) * 131 + static_cast<uint64_t>(e.index));
    for (int c : control) h = Mix(h, static_cast<uint64_t>(c) * 7919);
    h = Mix(h, node.def.attrs.size());
    if (is_const) h = Mix(h, Fingerprint(*ConstValue(node)));
    std::vector<int>& bucket = buckets[h];
    int match = -1;
    for (int other : bucket) {
      const Graph::Node& o = g.node(other);
      if (o.op_name() != node.op_name() ||
          device[static_cast<std::size_t>(other)] != device[static_cast<std::size_t>(id)] ||
          o.def.attrs != node.def.attrs) {
        continue;
      }
      const auto [odata, ocontrol] = inputs_of(o);
      if (odata == data && ocontrol == control) {
        match = other;
        break;
      }
    }
    if (match < 0) {
      bucket.push_back(id);
      continue;
    }
    same[static_cast<std::size_t>(id)] = match;
    for (int k = 0; k < node.num_outputs(); ++k) edit.Forward(id, k, Endpoint{match, k});
    edit.ForwardControl(id, {match});
    edit.Remove(id);
    NoteExample(report, node.name());
    ++changed;
  }
  return changed;
}

}  // namespace weft::passes::internal
