#include "core/runtime/run_rewrite.h"

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace weft::runtime {

Expected<RunSignature> RunSignature::Make(const std::vector<std::pair<std::string, Tensor>>& feeds,
                                          const std::vector<std::string>& fetches,
                                          const std::vector<std::string>& targets) {
  RunSignature s;
  for (const auto& [name, value] : feeds) s.feeds.push_back(name);
  std::sort(s.feeds.begin(), s.feeds.end());
  if (auto twice = std::adjacent_find(s.feeds.begin(), s.feeds.end()); twice != s.feeds.end()) {
    return InvalidArgumentError("feed ", Quote(*twice), " is given twice");
  }
  s.fetches = fetches;
  std::sort(s.fetches.begin(), s.fetches.end());
  s.fetches.erase(std::unique(s.fetches.begin(), s.fetches.end()), s.fetches.end());
  s.targets = targets;
  std::sort(s.targets.begin(), s.targets.end());
  s.targets.erase(std::unique(s.targets.begin(), s.targets.end()), s.targets.end());
  if (s.fetches.empty() && s.targets.empty()) {
    return InvalidArgumentError("nothing to run: give at least one fetch or target");
  }
  s.key = StrCat(StrJoin(s.feeds, ","), "|", StrJoin(s.fetches, ","), "|", StrJoin(s.targets, ","));
  return s;
}

std::size_t RunSignature::FeedIndex(const std::string& feed) const {
  return static_cast<std::size_t>(std::lower_bound(feeds.begin(), feeds.end(), feed) - feeds.begin());
}

std::size_t RunSignature::FetchIndex(const std::string& fetch) const {
  return static_cast<std::size_t>(std::lower_bound(fetches.begin(), fetches.end(), fetch) - fetches.begin());
}

Expected<std::vector<Tensor>> RunSignature::Args(const std::vector<std::pair<std::string, Tensor>>& given,
                                                 const std::vector<DType>& types,
                                                 const std::vector<Shape>& shapes) const {
  std::vector<Tensor> args(feeds.size());
  for (const auto& [name, value] : given) {
    const std::size_t i = FeedIndex(name);
    if (value.dtype() != types[i]) {
      return InvalidArgumentError("feed ", Quote(name), " has dtype ", DTypeName(value.dtype()), "; the graph expects ",
                                  DTypeName(types[i]));
    }
    if (!shapes[i].IsCompatibleWith(value.shape())) {
      return InvalidArgumentError("feed ", Quote(name), " has shape ", value.shape().ToString(), "; the graph expects ",
                                  shapes[i].ToString());
    }
    args[i] = value;
  }
  return args;
}

Expected<RunGraph> RewriteForRun(const Graph& graph, const std::vector<std::string>& feeds,
                                 const std::vector<std::string>& fetches, const std::vector<std::string>& targets) {
  RunGraph out;
  // Works on node ids and copies only the nodes the run keeps: linear in
  // the graph, whose nodes are not copied twice (a million-node chain).
  std::unordered_set<std::string> added;
  auto unique = [&](const std::string& base) {
    std::string name = base;
    for (int i = 1; graph.Find(name) != nullptr || added.count(name) != 0; ++i) name = StrCat(base, "_", i);
    added.insert(name);
    return name;
  };

  // Feeds become _Arg nodes, and every consumer of a fed tensor reads the
  // _Arg instead.
  std::vector<NodeDef> args;
  std::vector<bool> arg_used;
  std::map<std::pair<int, int>, std::size_t> fed;  // endpoint -> feed index
  for (std::size_t i = 0; i < feeds.size(); ++i) {
    auto endpoint = graph.ResolveTensor(feeds[i]);
    if (!endpoint.ok()) return endpoint.status().WithContext(StrCat("feed ", Quote(feeds[i])));
    const Graph::Node& node = graph.node(endpoint->node);
    const DType dtype = node.output_types[static_cast<std::size_t>(endpoint->index)];
    const Shape shape = node.output_shapes[static_cast<std::size_t>(endpoint->index)];
    out.feed_types.push_back(dtype);
    out.feed_shapes.push_back(shape);
    NodeDef arg;
    arg.name = unique(StrCat("_arg_", i));
    arg.op = "_Arg";
    arg.device = node.def.device;
    arg.attrs = {{"T", AttrValue(dtype)}, {"index", AttrValue(static_cast<int64_t>(i))}, {"shape", AttrValue(shape)}};
    fed[{endpoint->node, endpoint->index}] = i;
    args.push_back(std::move(arg));
    arg_used.push_back(false);
  }
  // Fetches become _Retval nodes.
  std::vector<NodeDef> retvals;
  std::vector<std::string> roots;
  std::vector<int> root_ids;
  for (std::size_t i = 0; i < fetches.size(); ++i) {
    auto endpoint = graph.ResolveTensor(fetches[i]);
    if (!endpoint.ok()) return endpoint.status().WithContext(StrCat("fetch ", Quote(fetches[i])));
    const Graph::Node& node = graph.node(endpoint->node);
    auto it = fed.find({endpoint->node, endpoint->index});
    NodeDef retval;
    retval.name = unique(StrCat("_retval_", i));
    retval.op = "_Retval";
    if (it != fed.end()) {
      retval.inputs = {args[it->second].name};
      arg_used[it->second] = true;
    } else {
      retval.inputs = {InputRefString(node.name(), endpoint->index)};
      root_ids.push_back(endpoint->node);
    }
    retval.attrs = {{"T", AttrValue(node.output_types[static_cast<std::size_t>(endpoint->index)])},
                    {"index", AttrValue(static_cast<int64_t>(i))}};
    retval.device = node.def.device;
    roots.push_back(retval.name);
    retvals.push_back(std::move(retval));
  }
  for (const std::string& target : targets) {
    const Graph::Node* node = graph.Find(target);
    if (node == nullptr) {
      auto endpoint = graph.ResolveTensor(target);  // for the "did you mean" message
      return (endpoint.ok() ? NotFoundError(Quote(target), " is not a node") : endpoint.status())
          .WithContext(StrCat("target ", Quote(target)));
    }
    roots.push_back(target);
    root_ids.push_back(node->id);
  }

  // Prune to what the roots need: a fed tensor cuts the walk (its
  // consumers read the _Arg), and so does a control input on a fed node
  // with one output (it waits for the _Arg; the node itself does not run:
  // a fed Placeholder would fail).
  const std::size_t n = static_cast<std::size_t>(graph.num_nodes());
  auto fed_arg = [&](int node, int index) -> std::optional<std::size_t> {
    if (fed.empty()) return std::nullopt;
    auto it = fed.find({node, index});
    if (it == fed.end()) return std::nullopt;
    return it->second;
  };
  auto fed_control = [&](int node) -> std::optional<std::size_t> {
    if (fed.empty() || graph.node(node).output_types.size() != 1) return std::nullopt;
    return fed_arg(node, 0);
  };
  std::vector<uint8_t> keep(n, 0);
  std::vector<int> stack;
  auto visit = [&](int id) {
    if (keep[static_cast<std::size_t>(id)] != 0) return;
    keep[static_cast<std::size_t>(id)] = 1;
    stack.push_back(id);
  };
  for (int id : root_ids) visit(id);
  while (!stack.empty()) {
    const Graph::Node& node = graph.node(stack.back());
    stack.pop_back();
    for (const Endpoint& e : node.inputs) {
      if (auto arg = fed_arg(e.node, e.index)) {
        arg_used[*arg] = true;
      } else {
        visit(e.node);
      }
    }
    for (int c : node.control_inputs) {
      if (auto arg = fed_control(c)) {
        arg_used[*arg] = true;
      } else {
        visit(c);
      }
    }
  }

  GraphDef pruned;
  pruned.library = graph.library();
  std::size_t kept = 0;
  for (uint8_t k : keep) kept += k;
  pruned.nodes.reserve(kept + args.size() + retvals.size());
  for (std::size_t i = 0; i < n; ++i) {
    if (keep[i] == 0) continue;
    const Graph::Node& node = graph.node(static_cast<int>(i));
    pruned.nodes.push_back(node.def);
    if (fed.empty()) continue;
    NodeDef& def = pruned.nodes.back();
    for (std::size_t k = 0; k < node.inputs.size(); ++k) {
      if (auto arg = fed_arg(node.inputs[k].node, node.inputs[k].index)) def.inputs[k] = args[*arg].name;
    }
    for (std::size_t k = 0; k < node.control_inputs.size(); ++k) {
      if (auto arg = fed_control(node.control_inputs[k])) {
        def.inputs[node.inputs.size() + k] = InputRefString(args[*arg].name, -1);
      }
    }
  }
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (arg_used[i]) pruned.nodes.push_back(std::move(args[i]));
  }
  for (NodeDef& retval : retvals) pruned.nodes.push_back(std::move(retval));
  WEFT_ASSIGN_OR_RETURN(Graph run_graph, Graph::FromGraphDef(std::move(pruned)));
  out.graph = std::make_shared<const Graph>(std::move(run_graph));
  out.roots = std::move(roots);
  return out;
}

}  // namespace weft::runtime
