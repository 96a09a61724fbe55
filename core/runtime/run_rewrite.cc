#include "core/runtime/run_rewrite.h"

#include <algorithm>
#include <deque>
#include <map>
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
  GraphDef def = graph.ToGraphDef();
  std::unordered_set<std::string> names;
  for (const NodeDef& n : def.nodes) names.insert(n.name);
  auto unique = [&](const std::string& base) {
    std::string name = base;
    for (int i = 1; names.count(name) != 0; ++i) name = StrCat(base, "_", i);
    names.insert(name);
    return name;
  };

  // Feeds become _Arg nodes, and every consumer of a fed tensor reads the
  // _Arg instead.
  std::map<std::pair<int, int>, std::string> fed;
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
    fed[{endpoint->node, endpoint->index}] = arg.name;
    def.nodes.push_back(std::move(arg));
  }
  // A control input on a fed node with one output waits for its _Arg (the
  // node itself does not run: a fed Placeholder would fail).
  if (!fed.empty()) {
    for (NodeDef& n : def.nodes) {
      for (std::string& input : n.inputs) {
        auto ref = ParseInputRef(input);
        if (!ref.ok()) continue;
        const Graph::Node* src = graph.Find(ref->node);
        if (src == nullptr) continue;
        if (ref->control()) {
          if (src->output_types.size() != 1) continue;
          auto it = fed.find({src->id, 0});
          if (it != fed.end()) input = InputRefString(it->second, -1);
          continue;
        }
        auto it = fed.find({src->id, ref->index});
        if (it != fed.end()) input = it->second;
      }
    }
  }
  // Fetches become _Retval nodes.
  std::vector<std::string> roots;
  for (std::size_t i = 0; i < fetches.size(); ++i) {
    auto endpoint = graph.ResolveTensor(fetches[i]);
    if (!endpoint.ok()) return endpoint.status().WithContext(StrCat("fetch ", Quote(fetches[i])));
    const Graph::Node& node = graph.node(endpoint->node);
    auto it = fed.find({endpoint->node, endpoint->index});
    NodeDef retval;
    retval.name = unique(StrCat("_retval_", i));
    retval.op = "_Retval";
    retval.inputs = {it != fed.end() ? it->second : InputRefString(node.name(), endpoint->index)};
    retval.attrs = {{"T", AttrValue(node.output_types[static_cast<std::size_t>(endpoint->index)])},
                    {"index", AttrValue(static_cast<int64_t>(i))}};
    retval.device = node.def.device;
    roots.push_back(retval.name);
    def.nodes.push_back(std::move(retval));
  }
  for (const std::string& target : targets) {
    if (graph.Find(target) == nullptr) {
      auto endpoint = graph.ResolveTensor(target);  // for the "did you mean" message
      return (endpoint.ok() ? NotFoundError(Quote(target), " is not a node") : endpoint.status())
          .WithContext(StrCat("target ", Quote(target)));
    }
    roots.push_back(target);
  }

  // Prune to what the roots need.
  std::unordered_map<std::string, const NodeDef*> by_name;
  for (const NodeDef& n : def.nodes) by_name[n.name] = &n;
  std::unordered_set<std::string> keep;
  std::deque<std::string> queue(roots.begin(), roots.end());
  while (!queue.empty()) {
    const std::string name = queue.front();
    queue.pop_front();
    if (!keep.insert(name).second) continue;
    for (const std::string& input : by_name[name]->inputs) {
      auto ref = ParseInputRef(input);
      if (ref.ok()) queue.push_back(ref->node);
    }
  }
  GraphDef pruned;
  pruned.library = def.library;
  for (NodeDef& n : def.nodes) {
    if (keep.count(n.name) != 0) pruned.nodes.push_back(std::move(n));
  }
  WEFT_ASSIGN_OR_RETURN(Graph run_graph, Graph::FromGraphDef(std::move(pruned)));
  out.graph = std::make_shared<const Graph>(std::move(run_graph));
  out.roots = std::move(roots);
  return out;
}

}  // namespace weft::runtime
