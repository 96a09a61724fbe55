#include "tests/support/loop_test_graphs.h"

namespace weft::testing {

std::vector<Output> RawLoop(GraphBuilder& b, const std::string& name, int parallel, const std::vector<Output>& init,
                            const std::vector<Output>& invariants, const LoopCondFn& cond, const LoopBodyFn& body) {
  auto scope = b.NameScope(name);
  const AttrMap enter_attrs = {{"frame_name", AttrValue(name)},
                               {"parallel_iterations", AttrValue(static_cast<int64_t>(parallel))}};
  std::vector<Output> merges, entered_invariants;
  for (const Output& v : init) {
    Output enter = b.Op("Enter", {v}, enter_attrs, "enter");
    merges.push_back(b.AddNode("Merge", {enter, enter}, {}, "merge")[0]);
  }
  for (const Output& v : invariants) {
    AttrMap attrs = enter_attrs;
    attrs["is_constant"] = AttrValue(true);
    entered_invariants.push_back(b.Op("Enter", {v}, attrs, "invariant"));
  }
  Output pred = b.Op("LoopCond", {cond(merges, entered_invariants)}, {}, "loop_cond");
  std::vector<Output> bodies, exits;
  for (const Output& m : merges) {
    std::vector<Output> sw = b.AddNode("Switch", {m, pred}, {}, "switch");
    bodies.push_back(b.Op("Identity", {sw[1]}, {}, "body"));
    exits.push_back(b.Op("Exit", {sw[0]}, {}, "exit"));
  }
  const Output pivot = bodies[0];
  InFrame in = [&b, pivot](int64_t value) {
    auto deps = b.ControlDependencies({pivot});
    return b.Scalar<int64_t>(value);
  };
  std::vector<Output> results = body(bodies, entered_invariants, in);
  for (std::size_t k = 0; k < merges.size() && k < results.size(); ++k) {
    Output next = b.Op("NextIteration", {results[k]}, {}, "next");
    if (b.status().ok() && !b.SetInput(merges[k].node(), 1, next).ok()) return {};
  }
  return exits;
}

std::pair<Output, Output> SumLoop(GraphBuilder& b, const Output& n, int parallel, const std::string& name) {
  std::vector<Output> out = RawLoop(
      b, name, parallel, {b.Scalar<int64_t>(0, name + "_i0"), b.Scalar<int64_t>(0, name + "_s0")}, {n},
      [&b](const std::vector<Output>& v, const std::vector<Output>& inv) {
        return b.Op("Less", {v[0], inv[0]});
      },
      [&b](const std::vector<Output>& v, const std::vector<Output>&, const InFrame& in) {
        Output i_next = b.Op("Add", {v[0], in(1)}, {}, "i_next");
        Output s_next = b.Op("Add", {v[1], v[0]}, {}, "s_next");
        return std::vector<Output>{i_next, s_next};
      });
  return {out[0], out[1]};
}

std::unique_ptr<runtime::Session> SumLoopSession(RuntimeEnv& env, int parallel) {
  GraphBuilder b;
  Output limit = b.Placeholder(DType::kI64, Shape{}, "n");
  auto [i, s] = SumLoop(b, limit, parallel, "loop");
  b.Op("Identity", {i}, {}, "count");
  b.Op("Identity", {s}, {}, "sum");
  return env.Session(b);
}

Output NestedProductSum(GraphBuilder& b, const Output& a, const Output& c, int parallel) {
  std::vector<Output> out = RawLoop(
      b, "outer", parallel, {b.Scalar<int64_t>(0, "i0"), b.Scalar<int64_t>(0, "total0")}, {a, c},
      [&b](const std::vector<Output>& v, const std::vector<Output>& inv) {
        return b.Op("Less", {v[0], inv[0]});
      },
      [&b, parallel](const std::vector<Output>& v, const std::vector<Output>& inv, const InFrame& in) {
        const Output i = v[0];
        std::vector<Output> inner = RawLoop(
            b, "inner", parallel, {in(0), in(0)}, {i, inv[1]},
            [&b](const std::vector<Output>& w, const std::vector<Output>& winv) {
              return b.Op("Less", {w[0], winv[1]});
            },
            [&b](const std::vector<Output>& w, const std::vector<Output>& winv, const InFrame& in2) {
              Output j_next = b.Op("Add", {w[0], in2(1)});
              Output acc_next = b.Op("Add", {w[1], b.Op("Mul", {winv[0], w[0]})});
              return std::vector<Output>{j_next, acc_next};
            });
        return std::vector<Output>{b.Op("Add", {i, in(1)}), b.Op("Add", {v[1], inner[1]})};
      });
  return out[1];
}

Output GatherLoop(GraphBuilder& b, const Output& n, const Output& table) {
  std::vector<Output> out = RawLoop(
      b, "gloop", 1, {b.Scalar<int64_t>(0, "g_i0"), b.Scalar<float>(0, "g_acc0")}, {n, table},
      [&b](const std::vector<Output>& v, const std::vector<Output>& inv) {
        return b.Op("Less", {v[0], inv[0]});
      },
      [&b](const std::vector<Output>& v, const std::vector<Output>& inv, const InFrame& in) {
        Output value = b.Op("Gather", {inv[1], v[0]}, {}, "gather");
        return std::vector<Output>{b.Op("Add", {v[0], in(1)}), b.Op("Add", {v[1], value})};
      });
  return out[1];
}

}  // namespace weft::testing
