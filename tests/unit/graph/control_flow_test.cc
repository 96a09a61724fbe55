// Structure of the graphs Cond and WhileLoop build (ops, names, frames,
// captures, pivots), nesting, and every error they report. Running them is
// tests/integration/control_flow_test.cc.
#include "core/graph/control_flow.h"

#include <gtest/gtest.h>

#include "core/graph/serialize.h"
#include "core/ops/ops.h"

namespace weft {
namespace {

using Outputs = std::vector<Output>;
using Strings = std::vector<std::string>;

// The node named |name| of the graph being built (fails the test if absent).
const NodeDef& NodeNamed(const GraphBuilder& b, const std::string& name) {
  const Output o = b.Find(name);
  EXPECT_TRUE(o.valid()) << "no node " << name;
  static const NodeDef kNone;
  return o.valid() ? b.node_def(o.node()) : kNone;
}

const AttrValue& AttrOf(const NodeDef& n, const std::string& attr) {
  static const AttrValue kNone;
  auto it = n.attrs.find(attr);
  EXPECT_NE(it, n.attrs.end()) << n.name << " has no attr " << attr;
  return it == n.attrs.end() ? kNone : it->second;
}

// The names of the nodes of op |op|, in creation order.
Strings NodesOf(const GraphBuilder& b, const std::string& op) {
  Strings names;
  for (const NodeDef& n : b.def().nodes) {
    if (n.op == op) names.push_back(n.name);
  }
  return names;
}

WhileOptions Options(int parallel_iterations, std::string name = "while") {
  WhileOptions options;
  options.parallel_iterations = parallel_iterations;
  options.name = std::move(name);
  return options;
}

// Builds, and checks that the graph survives both file formats.
void ExpectValidAndRoundTrips(const GraphBuilder& b) {
  ASSERT_TRUE(b.status().ok()) << b.status().message();
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().message();
  for (GraphFormat format : {GraphFormat::kBinary, GraphFormat::kText}) {
    auto def = ParseGraphDef(SerializeGraphDef(graph->ToGraphDef(), format), format, "round trip");
    ASSERT_TRUE(def.ok()) << def.status().message();
    auto again = Graph::FromGraphDef(*def);
    ASSERT_TRUE(again.ok()) << again.status().message();
    ASSERT_EQ(again->num_nodes(), graph->num_nodes());
    for (int i = 0; i < graph->num_nodes(); ++i) {
      const Graph::Node* n = again->Find(graph->node(i).name());
      ASSERT_NE(n, nullptr);
      EXPECT_EQ(n->def.inputs, graph->node(i).def.inputs) << n->name();
      EXPECT_EQ(n->op_name(), graph->node(i).op_name());
    }
  }
}

TEST(Cond, Structure) {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{2}, "x");
  Output p = b.Placeholder(DType::kBool, Shape{}, "p");
  auto r = Cond(
      b, p, [&]() -> Expected<Outputs> { return Outputs{b.Op("Neg", {x}, {}, "neg")}; },
      [&]() -> Expected<Outputs> {
        return Outputs{b.Op("Mul", {x, b.Const(Tensor::FromVector<float>({2, 3}), "two")}, {}, "mul")};
      });
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].name(), "cond/Merge");
  EXPECT_EQ((*r)[0].shape(), Shape{2});
  EXPECT_EQ((*r)[0].dtype(), DType::kF32);

  EXPECT_EQ(NodesOf(b, "Switch"), (Strings{"cond/Switch", "cond/Switch_1", "cond/Switch_2"}));
  EXPECT_EQ(NodeNamed(b, "cond/Switch").inputs, (Strings{"p", "p"}));
  EXPECT_EQ(NodeNamed(b, "cond/switch_t").inputs, (Strings{"cond/Switch:1"}));
  EXPECT_EQ(NodeNamed(b, "cond/switch_f").inputs, (Strings{"cond/Switch"}));
  // x reaches each branch through its own Switch: output_true for the
  // true branch, output_false for the false one.
  EXPECT_EQ(NodeNamed(b, "cond/Switch_1").inputs, (Strings{"x", "p"}));
  EXPECT_EQ(NodeNamed(b, "cond/neg").inputs, (Strings{"cond/Switch_1:1"}));
  EXPECT_EQ(NodeNamed(b, "cond/Switch_2").inputs, (Strings{"x", "p"}));
  EXPECT_EQ(NodeNamed(b, "cond/mul").inputs, (Strings{"cond/Switch_2", "cond/two"}));
  // A constant in a branch runs only when the branch is taken.
  EXPECT_EQ(NodeNamed(b, "cond/two").inputs, (Strings{"^cond/switch_f"}));
  EXPECT_EQ(NodeNamed(b, "cond/Merge").inputs, (Strings{"cond/mul", "cond/neg"}));

  EXPECT_EQ(b.node_context((*r)[0].node()), nullptr);
  ASSERT_NE(b.node_context(b.Find("cond/neg").node()), nullptr);
  EXPECT_EQ(b.node_context(b.Find("cond/neg").node())->Describe(), "cond 'cond' (true branch)");
  EXPECT_EQ(b.node_context(b.Find("cond/mul").node())->Describe(), "cond 'cond' (false branch)");
  ExpectValidAndRoundTrips(b);
}

TEST(Cond, CapturesOncePerBranchAndRoutesReturnedOutsideTensors) {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{-1}, "x");
  Output y = b.Placeholder(DType::kF32, Shape{3}, "y");
  Output p = b.Placeholder(DType::kBool, Shape{}, "p");
  auto r = Cond(
      b, p,
      [&]() -> Expected<Outputs> {
        return Outputs{b.Op("Mul", {x, x}), y};
      },
      [&]() -> Expected<Outputs> {
        return Outputs{y, x};
      },
      "pick");
  ASSERT_TRUE(r.ok()) << r.status().message();
  // True: x once, y once; false: y, x.
  EXPECT_EQ(NodesOf(b, "Switch"),
            (Strings{"pick/Switch", "pick/Switch_1", "pick/Switch_2", "pick/Switch_3", "pick/Switch_4"}));
  EXPECT_EQ(NodeNamed(b, "pick/Mul").inputs, (Strings{"pick/Switch_1:1", "pick/Switch_1:1"}));
  EXPECT_EQ(NodeNamed(b, "pick/Merge").inputs, (Strings{"pick/Switch_3", "pick/Mul"}));
  EXPECT_EQ(NodeNamed(b, "pick/Merge_1").inputs, (Strings{"pick/Switch_4", "pick/Switch_2:1"}));
  // The Merge keeps what both branches agree on.
  EXPECT_EQ((*r)[0].shape(), Shape{-1});
  EXPECT_EQ((*r)[1].shape(), Shape{-1});
  ExpectValidAndRoundTrips(b);
}

// Sum of 0..n-1 with a constant in the condition and one in the body.
TEST(While, Structure) {
  GraphBuilder b;
  Output n = b.Placeholder(DType::kI32, Shape{}, "n");
  auto r = WhileLoop(
      b,
      [&](const Outputs& v) -> Expected<Output> {
        return b.Op("LogicalAnd",
                    {b.Op("Less", {v[0], n}, {}, "less"), b.Op("Greater", {v[0], b.Scalar<int32_t>(-1, "minus_one")})});
      },
      [&](const Outputs& v) -> Expected<Outputs> {
        return Outputs{b.Op("Add", {v[0], b.Scalar<int32_t>(1, "one")}, {}, "next_i"),
                       b.Op("Add", {v[1], v[0]}, {}, "sum")};
      },
      {b.Scalar<int32_t>(0, "i0"), b.Scalar<int32_t>(0, "s0")});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].name(), "while/Exit");
  EXPECT_EQ((*r)[1].name(), "while/Exit_1");

  EXPECT_EQ(NodesOf(b, "Enter"), (Strings{"while/Enter", "while/Enter_1", "while/Enter_2"}));
  for (const std::string& e : NodesOf(b, "Enter")) {
    EXPECT_EQ(AttrOf(NodeNamed(b, e), "frame_name").get<std::string>(), "while");
    EXPECT_EQ(AttrOf(NodeNamed(b, e), "parallel_iterations").get<int64_t>(), 10);
  }
  EXPECT_EQ(NodeNamed(b, "while/Enter").inputs, (Strings{"i0"}));
  EXPECT_FALSE(AttrOf(NodeNamed(b, "while/Enter"), "is_constant").get<bool>());
  EXPECT_EQ(NodeNamed(b, "while/Enter_1").inputs, (Strings{"s0"}));
  // n, used by the condition, enters as a loop invariant.
  EXPECT_EQ(NodeNamed(b, "while/Enter_2").inputs, (Strings{"n"}));
  EXPECT_TRUE(AttrOf(NodeNamed(b, "while/Enter_2"), "is_constant").get<bool>());

  EXPECT_EQ(NodeNamed(b, "while/Merge").inputs, (Strings{"while/Enter", "while/NextIteration"}));
  EXPECT_EQ(NodeNamed(b, "while/Merge_1").inputs, (Strings{"while/Enter_1", "while/NextIteration_1"}));
  EXPECT_EQ(NodeNamed(b, "while/less").inputs, (Strings{"while/Merge", "while/Enter_2"}));
  EXPECT_EQ(NodeNamed(b, "while/minus_one").inputs, (Strings{"^while/Merge"}));
  EXPECT_EQ(NodeNamed(b, "while/LoopCond").inputs, (Strings{"while/LogicalAnd"}));
  EXPECT_EQ(NodeNamed(b, "while/Switch").inputs, (Strings{"while/Merge", "while/LoopCond"}));
  EXPECT_EQ(NodeNamed(b, "while/Switch_1").inputs, (Strings{"while/Merge_1", "while/LoopCond"}));
  EXPECT_EQ(NodeNamed(b, "while/Identity").inputs, (Strings{"while/Switch:1"}));
  EXPECT_EQ(NodeNamed(b, "while/Identity_1").inputs, (Strings{"while/Switch_1:1"}));
  EXPECT_EQ(NodeNamed(b, "while/one").inputs, (Strings{"^while/Identity"}));
  EXPECT_EQ(NodeNamed(b, "while/next_i").inputs, (Strings{"while/Identity", "while/one"}));
  EXPECT_EQ(NodeNamed(b, "while/sum").inputs, (Strings{"while/Identity_1", "while/Identity"}));
  EXPECT_EQ(NodeNamed(b, "while/NextIteration").inputs, (Strings{"while/next_i"}));
  EXPECT_EQ(NodeNamed(b, "while/NextIteration_1").inputs, (Strings{"while/sum"}));
  EXPECT_EQ(NodeNamed(b, "while/Exit").inputs, (Strings{"while/Switch"}));
  EXPECT_EQ(NodeNamed(b, "while/Exit_1").inputs, (Strings{"while/Switch_1"}));
  EXPECT_EQ(b.node_context((*r)[0].node()), nullptr);
  EXPECT_EQ(b.node_context(b.Find("while/sum").node())->Describe(), "while loop 'while'");
  ExpectValidAndRoundTrips(b);

  // A second loop gets its own scope, hence its own frame.
  auto again = WhileLoop(
      b,
      [&](const Outputs& v) -> Expected<Output> {
        return b.Op("Less", {v[0], n});
      },
      [&](const Outputs& v) -> Expected<Outputs> {
        return Outputs{b.Op("Add", {v[0], v[0]})};
      },
      {(*r)[1]}, Options(1));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ((*again)[0].name(), "while_1/Exit");
  EXPECT_EQ(AttrOf(NodeNamed(b, "while_1/Enter"), "frame_name").get<std::string>(), "while_1");
  EXPECT_EQ(AttrOf(NodeNamed(b, "while_1/Enter"), "parallel_iterations").get<int64_t>(), 1);
  EXPECT_EQ(NodeNamed(b, "while_1/Enter").inputs, (Strings{"while/Exit_1"}));
  ExpectValidAndRoundTrips(b);
}

// Doubles a vector's length each iteration: legal only with an invariant.
TEST(While, ShapeInvariantLetsALoopVariableGrow) {
  GraphBuilder b;
  Output v0 = b.Placeholder(DType::kF32, Shape{2}, "v0");
  WhileOptions options;
  options.shape_invariants = {Shape{-1}};
  auto r = WhileLoop(
      b, [&](const Outputs&) -> Expected<Output> { return b.Placeholder(DType::kBool, Shape{}, "go"); },
      [&](const Outputs& v) -> Expected<Outputs> {
        return Outputs{b.Op("Concat", {v[0], v[0]}, {{"axis", AttrValue(int64_t{0})}})};
      },
      {v0}, options);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(AttrOf(NodeNamed(b, "while/Enter"), "shape_invariant").get<std::vector<Shape>>(),
            (std::vector<Shape>{Shape{-1}}));
  EXPECT_EQ((*r)[0].shape(), Shape{-1});
  // A node without inputs in the condition hangs on the first Merge.
  EXPECT_EQ(NodeNamed(b, "while/go").inputs, (Strings{"^while/Merge"}));
  ExpectValidAndRoundTrips(b);
}

TEST(While, MaximumIterationsAddsAHiddenCounter) {
  GraphBuilder b;
  WhileOptions options;
  options.maximum_iterations = 5;
  options.name = "capped";
  auto r = WhileLoop(
      b,
      [&](const Outputs& v) -> Expected<Output> {
        return b.Op("Less", {v[0], b.Scalar<float>(100)});
      },
      [&](const Outputs& v) -> Expected<Outputs> {
        return Outputs{b.Op("Add", {v[0], v[0]})};
      },
      {b.Scalar<float>(1, "x0")}, options);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ(NodesOf(b, "Exit"), (Strings{"capped/Exit"}));
  EXPECT_EQ(NodeNamed(b, "capped/Enter_1").inputs, (Strings{"capped/iteration_counter"}));
  EXPECT_EQ(NodeNamed(b, "capped/below_maximum_iterations").inputs, (Strings{"capped/Merge_1", "capped/Enter_2"}));
  EXPECT_EQ(NodeNamed(b, "capped/Enter_2").inputs, (Strings{"capped/maximum_iterations"}));
  EXPECT_EQ(NodeNamed(b, "capped/LogicalAnd").inputs, (Strings{"capped/Less", "capped/below_maximum_iterations"}));
  EXPECT_EQ(NodeNamed(b, "capped/next_iteration_count").inputs, (Strings{"capped/Identity_1", "capped/Const_1"}));
  EXPECT_EQ(NodeNamed(b, "capped/NextIteration_1").inputs, (Strings{"capped/next_iteration_count"}));
  ExpectValidAndRoundTrips(b);
}

// n from the top level, used two loops deep: it enters the outer frame,
// then the inner one.
TEST(While, NestedLoopsCaptureThroughEachLevel) {
  GraphBuilder b;
  Output n = b.Placeholder(DType::kI32, Shape{}, "n");
  auto r = WhileLoop(
      b,
      [&](const Outputs& v) -> Expected<Output> {
        return b.Op("Less", {v[0], n});
      },
      [&](const Outputs& v) -> Expected<Outputs> {
        Output i = v[0];
        WEFT_ASSIGN_OR_RETURN(Outputs inner, WhileLoop(
                                                 b,
                                                 [&](const Outputs& w) -> Expected<Output> {
                                                   return b.Op("Less", {w[0], n});
                                                 },
                                                 [&](const Outputs& w) -> Expected<Outputs> {
                                                   return Outputs{b.Op("Add", {w[0], b.Scalar<int32_t>(1)}),
                                                                  b.Op("Add", {w[1], b.Op("Mul", {i, w[0]})})};
                                                 },
                                                 {b.Scalar<int32_t>(0, "j0"), v[1]}));
        return Outputs{b.Op("Add", {i, b.Scalar<int32_t>(1)}), inner[1]};
      },
      {b.Scalar<int32_t>(0), b.Scalar<int32_t>(0)});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(AttrOf(NodeNamed(b, "while/while/Enter"), "frame_name").get<std::string>(), "while/while");
  // j0 is made in the outer body: it depends on the outer pivot.
  EXPECT_EQ(NodeNamed(b, "while/j0").inputs, (Strings{"^while/Identity"}));
  // n: outer Enter (made for the outer condition), then an inner Enter of it.
  EXPECT_EQ(NodeNamed(b, "while/Enter_2").inputs, (Strings{"n"}));
  const NodeDef& inner_n = NodeNamed(b, "while/while/Enter_2");
  EXPECT_EQ(inner_n.inputs, (Strings{"while/Enter_2"}));
  EXPECT_TRUE(AttrOf(inner_n, "is_constant").get<bool>());
  EXPECT_EQ(AttrOf(inner_n, "frame_name").get<std::string>(), "while/while");
  // i, from the outer body, enters the inner loop as a constant too.
  const NodeDef& inner_i = NodeNamed(b, "while/while/Enter_3");
  EXPECT_EQ(inner_i.inputs, (Strings{"while/Identity"}));
  EXPECT_TRUE(AttrOf(inner_i, "is_constant").get<bool>());
  EXPECT_EQ(NodeNamed(b, "while/while/Exit_1").inputs, (Strings{"while/while/Switch_1"}));
  EXPECT_EQ(b.node_context(b.Find("while/while/Exit_1").node())->Describe(), "while loop 'while'");
  ExpectValidAndRoundTrips(b);
}

// x from the top level used in a cond inside a loop: Enter, then Switch.
TEST(While, CondInsideALoop) {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kI32, Shape{}, "x");
  auto r = WhileLoop(
      b,
      [&](const Outputs& v) -> Expected<Output> {
        return b.Op("Less", {v[0], b.Scalar<int32_t>(10)});
      },
      [&](const Outputs& v) -> Expected<Outputs> {
        Output odd = b.Op("Equal", {b.Op("FloorMod", {v[0], b.Scalar<int32_t>(2)}), b.Scalar<int32_t>(1)});
        return Cond(
            b, odd,
            [&]() -> Expected<Outputs> {
              return Outputs{b.Op("Add", {v[0], x})};
            },
            [&]() -> Expected<Outputs> {
              return Outputs{b.Op("Add", {v[0], b.Scalar<int32_t>(1, "one")})};
            });
      },
      {x});
  ASSERT_TRUE(r.ok()) << r.status().message();
  // The loop variable x and the captured x are different Enters.
  EXPECT_EQ(NodeNamed(b, "while/Enter").inputs, (Strings{"x"}));
  EXPECT_FALSE(AttrOf(NodeNamed(b, "while/Enter"), "is_constant").get<bool>());
  const NodeDef& entered = NodeNamed(b, "while/Enter_1");
  EXPECT_EQ(entered.inputs, (Strings{"x"}));
  EXPECT_TRUE(AttrOf(entered, "is_constant").get<bool>());
  EXPECT_EQ(NodeNamed(b, "while/cond/Add").inputs, (Strings{"while/cond/Switch_1:1", "while/cond/Switch_2:1"}));
  EXPECT_EQ(NodeNamed(b, "while/cond/Switch_1").inputs, (Strings{"while/Identity", "while/Equal"}));
  EXPECT_EQ(NodeNamed(b, "while/cond/Switch_2").inputs, (Strings{"while/Enter_1", "while/Equal"}));
  EXPECT_EQ(NodeNamed(b, "while/cond/one").inputs, (Strings{"^while/cond/switch_f"}));
  EXPECT_EQ(NodeNamed(b, "while/NextIteration").inputs, (Strings{"while/cond/Merge"}));
  ExpectValidAndRoundTrips(b);
}

// A loop in a branch starts from an outside tensor: Switch, then Enter.
TEST(Cond, LoopInsideABranch) {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{}, "x");
  Output p = b.Placeholder(DType::kBool, Shape{}, "p");
  auto r = Cond(
      b, p,
      [&]() -> Expected<Outputs> {
        return WhileLoop(
            b,
            [&](const Outputs& v) -> Expected<Output> {
              return b.Op("Less", {v[0], x});
            },
            [&](const Outputs& v) -> Expected<Outputs> {
              return Outputs{b.Op("Add", {v[0], v[0]})};
            },
            {b.Scalar<float>(1, "start")});
      },
      [&]() -> Expected<Outputs> { return Outputs{x}; });
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(NodeNamed(b, "cond/start").inputs, (Strings{"^cond/switch_t"}));
  EXPECT_EQ(NodeNamed(b, "cond/while/Enter").inputs, (Strings{"cond/start"}));
  EXPECT_EQ(NodeNamed(b, "cond/Switch_1").inputs, (Strings{"x", "p"}));
  EXPECT_EQ(NodeNamed(b, "cond/while/Enter_1").inputs, (Strings{"cond/Switch_1:1"}));
  EXPECT_EQ(NodeNamed(b, "cond/Merge").inputs, (Strings{"cond/Switch_2", "cond/while/Exit"}));
  ExpectValidAndRoundTrips(b);
}

// --- Errors ---------------------------------------------------------------

Expected<Output> AlwaysTrue(GraphBuilder& b) { return b.Scalar<bool>(true); }

// Runs a one-variable loop whose body returns |body_result(v)|.
Status LoopWithBody(GraphBuilder& b, const Output& start, const std::function<Outputs(const Output&)>& body_result,
                    const WhileOptions& options = {}) {
  return WhileLoop(
             b, [&](const Outputs&) { return AlwaysTrue(b); },
             [&](const Outputs& v) -> Expected<Outputs> { return body_result(v[0]); }, {start}, options)
      .status();
}

TEST(ControlFlowErrors, BranchesReturnDifferentCounts) {
  GraphBuilder b;
  Output p = b.Placeholder(DType::kBool, Shape{}, "p");
  auto r = Cond(
      b, p,
      [&]() -> Expected<Outputs> {
        return Outputs{b.Scalar<float>(1), b.Scalar<float>(2)};
      },
      [&]() -> Expected<Outputs> { return Outputs{b.Scalar<float>(3)}; });
  EXPECT_EQ(r.status().message(),
            "cond 'cond': the true branch returns 2 outputs and the false branch 1; both branches must return the "
            "same number");
  EXPECT_EQ(b.Build().status().message(), r.status().message());
}

TEST(ControlFlowErrors, BranchesReturnDifferentDtypes) {
  GraphBuilder b;
  Output p = b.Placeholder(DType::kBool, Shape{}, "p");
  auto r = Cond(
      b, p,
      [&]() -> Expected<Outputs> {
        return Outputs{b.Scalar<float>(1), b.Scalar<float>(2)};
      },
      [&]() -> Expected<Outputs> {
        return Outputs{b.Scalar<float>(3), b.Scalar<int32_t>(4)};
      },
      "choose");
  EXPECT_EQ(r.status().message(),
            "cond 'choose': output 1 is f32 in the true branch and i32 in the false branch; both branches must "
            "return the same dtypes");
}

TEST(ControlFlowErrors, PredicateMustBeAScalarBool) {
  GraphBuilder b;
  Output f = b.Placeholder(DType::kF32, Shape{}, "f");
  auto branch = [&]() -> Expected<Outputs> { return Outputs{}; };
  EXPECT_EQ(Cond(b, f, branch, branch).status().message(), "cond 'cond': pred 'f' must be a scalar bool, is f32[]");
  GraphBuilder b2;
  Output v = b2.Placeholder(DType::kBool, Shape{2}, "v");
  EXPECT_EQ(Cond(b2, v, branch, branch).status().message(), "cond 'cond': pred 'v' must be a scalar bool, is bool[2]");
}

TEST(ControlFlowErrors, BranchErrorsPropagate) {
  GraphBuilder b;
  Output p = b.Placeholder(DType::kBool, Shape{}, "p");
  auto r = Cond(
      b, p, [&]() -> Expected<Outputs> { return InvalidArgumentError("no true branch today"); },
      [&]() -> Expected<Outputs> { return Outputs{}; });
  EXPECT_EQ(r.status().message(), "no true branch today");
  EXPECT_EQ(b.status().message(), "no true branch today");
}

TEST(ControlFlowErrors, LoopConditionMustBeAScalarBool) {
  GraphBuilder b;
  auto r = WhileLoop(
      b, [&](const Outputs& v) -> Expected<Output> { return b.Op("Neg", {v[0]}, {}, "neg"); },
      [&](const Outputs& v) -> Expected<Outputs> { return v; }, {b.Scalar<float>(1)});
  EXPECT_EQ(r.status().message(), "while loop 'while': the condition must be a scalar bool; 'while/neg' is f32[]");
  GraphBuilder b2;
  Output flags = b2.Placeholder(DType::kBool, Shape{3}, "flags");
  auto r2 = WhileLoop(
      b2, [&](const Outputs&) -> Expected<Output> { return flags; },
      [&](const Outputs& v) -> Expected<Outputs> { return v; }, {b2.Scalar<float>(1)}, Options(10, "w"));
  EXPECT_EQ(r2.status().message(), "while loop 'w': the condition must be a scalar bool; 'w/Enter_1' is bool[3]");
}

TEST(ControlFlowErrors, BodyReturnsWrongCount) {
  GraphBuilder b;
  Status s = LoopWithBody(b, b.Scalar<float>(1), [&](const Output& v) { return Outputs{v, v}; });
  EXPECT_EQ(s.message(), "while loop 'while': the body returns 2 values for 1 loop variables");
}

TEST(ControlFlowErrors, BodyChangesDtype) {
  GraphBuilder b;
  Status s = LoopWithBody(b, b.Scalar<float>(1), [&](const Output& v) {
    return Outputs{b.Op("Cast", {v}, {{"DstT", AttrValue(DType::kI32)}}, "to_int")};
  });
  EXPECT_EQ(s.message(),
            "while loop 'while': loop variable 0 is f32 but the body returns i32 ('while/to_int'); a loop "
            "variable keeps its dtype");
}

TEST(ControlFlowErrors, BodyChangesShapeWithoutInvariant) {
  GraphBuilder b;
  Status s = LoopWithBody(b, b.Placeholder(DType::kF32, Shape{2}, "v0"), [&](const Output& v) {
    return Outputs{b.Op("Concat", {v, v}, {{"axis", AttrValue(int64_t{0})}}, "grow")};
  });
  EXPECT_EQ(s.message(),
            "while loop 'while': loop variable 0 enters with shape [2] but the body returns 'while/grow' of shape "
            "[4]; give WhileOptions::shape_invariants (-1 for a dimension that may change) to let it change shape");
}

TEST(ControlFlowErrors, BodyBreaksShapeInvariant) {
  GraphBuilder b;
  WhileOptions options;
  options.shape_invariants = {Shape{-1, 3}};
  Output start = b.Placeholder(DType::kF32, Shape{2, 3}, "v0");
  Status s = LoopWithBody(
      b, start,
      [&](const Output& v) {
        return Outputs{b.Op("Concat", {v, v}, {{"axis", AttrValue(int64_t{1})}}, "wider")};
      },
      options);
  EXPECT_EQ(s.message(),
            "while loop 'while': loop variable 0 has shape invariant [?,3] but the body returns 'while/wider' of "
            "shape [?,6]; relax its entry in shape_invariants (-1 for a dimension that may change)");
}

TEST(ControlFlowErrors, InvariantMustFitTheEnteringValue) {
  GraphBuilder b;
  WhileOptions options;
  options.shape_invariants = {Shape{3}};
  Status s = LoopWithBody(
      b, b.Placeholder(DType::kF32, Shape{2}, "v0"), [](const Output& v) { return Outputs{v}; }, options);
  EXPECT_EQ(s.message(),
            "node 'while/Enter' (Enter): the loop variable enters with shape [2], which does not fit its shape "
            "invariant [3]");
}

TEST(ControlFlowErrors, BadOptions) {
  auto body = [](const Output& v) { return Outputs{v}; };
  {
    GraphBuilder b;
    EXPECT_EQ(WhileLoop(
                  b, [&](const Outputs&) { return AlwaysTrue(b); },
                  [](const Outputs& v) -> Expected<Outputs> { return v; }, {})
                  .status()
                  .message(),
              "while loop 'while': needs at least one loop variable");
  }
  {
    GraphBuilder b;
    EXPECT_EQ(LoopWithBody(b, b.Scalar<float>(1), body, Options(0)).message(),
              "while loop 'while': parallel_iterations is 0; it must be at least 1");
  }
  {
    GraphBuilder b;
    WhileOptions options;
    options.shape_invariants = {Shape{}, Shape{}};
    EXPECT_EQ(LoopWithBody(b, b.Scalar<float>(1), body, options).message(),
              "while loop 'while': 2 shape invariants for 1 loop variables; give none or one per loop variable");
  }
  {
    GraphBuilder b;
    WhileOptions options;
    options.maximum_iterations = -1;
    EXPECT_EQ(LoopWithBody(b, b.Scalar<float>(1), body, options).message(),
              "while loop 'while': maximum_iterations is -1; it must be at least 0");
  }
}

TEST(ControlFlowErrors, LoopTensorUsedOutsideTheLoop) {
  GraphBuilder b;
  Output inside;
  Status s = LoopWithBody(b, b.Scalar<float>(1), [&](const Output& v) {
    inside = b.Op("Neg", {v}, {}, "neg");
    return Outputs{inside};
  });
  ASSERT_TRUE(s.ok()) << s.message();
  b.Op("Abs", {inside}, {}, "abs");
  EXPECT_EQ(b.status().message(),
            "node 'abs' (Abs): input 0: tensor 'while/neg' is made inside while loop 'while' and is not visible "
            "outside it; use the results of the while loop instead");
}

TEST(ControlFlowErrors, BranchTensorUsedInTheOtherBranchOrOutside) {
  GraphBuilder b;
  Output p = b.Placeholder(DType::kBool, Shape{}, "p");
  Output x = b.Placeholder(DType::kF32, Shape{}, "x");
  Output in_true;
  auto r = Cond(
      b, p,
      [&]() -> Expected<Outputs> {
        in_true = b.Op("Neg", {x}, {}, "neg");
        return Outputs{in_true};
      },
      [&]() -> Expected<Outputs> { return Outputs{b.Op("Abs", {in_true}, {}, "abs")}; });
  EXPECT_EQ(r.status().message(),
            "node 'cond/abs' (Abs): input 0: tensor 'cond/neg' is made inside cond 'cond' (true branch) and is not "
            "visible in cond 'cond' (false branch); use the results of the cond instead");

  GraphBuilder b2;
  Output p2 = b2.Placeholder(DType::kBool, Shape{}, "p");
  Output inner;
  // Two levels deep: a tensor of a cond inside a loop, used after the loop.
  Status s = LoopWithBody(b2, b2.Scalar<float>(1), [&](const Output& v) {
    auto merged = Cond(
        b2, p2,
        [&]() -> Expected<Outputs> {
          inner = b2.Op("Neg", {v}, {}, "neg");
          return Outputs{inner};
        },
        [&]() -> Expected<Outputs> { return Outputs{v}; });
    return merged.ok() ? *merged : Outputs{};
  });
  ASSERT_TRUE(s.ok()) << s.message();
  auto captured = b2.Capture(inner, "the fetch");
  EXPECT_EQ(captured.status().message(),
            "the fetch: tensor 'while/cond/neg' is made inside while loop 'while' and is not visible outside it; "
            "use the results of the while loop instead");
}

TEST(ControlFlowErrors, InvalidOutputsFromUserFunctions) {
  {
    GraphBuilder b;
    auto r = WhileLoop(
        b, [](const Outputs&) -> Expected<Output> { return Output(); },
        [](const Outputs& v) -> Expected<Outputs> { return v; }, {b.Scalar<float>(1)});
    EXPECT_EQ(r.status().message(), "while loop 'while': the condition is not a valid output");
  }
  {
    GraphBuilder b;
    Status s = LoopWithBody(b, b.Scalar<float>(1), [](const Output&) { return Outputs{Output()}; });
    EXPECT_EQ(s.message(), "while loop 'while': body result 0 is not a valid output");
  }
  {
    GraphBuilder b;
    EXPECT_EQ(b.Capture(Output()).status().message(), "Capture: not a valid output");
    EXPECT_EQ(b.status().message(), "Capture: not a valid output");
  }
}

// Control dependencies opened around a loop hold its Enter nodes (the
// loop's start); nodes inside a frame never get control edges from
// outside it, and dependencies opened inside still work.
TEST(While, ControlDependenciesAroundALoopHoldItsEnters) {
  GraphBuilder b;
  Output first = b.Scalar<float>(1, "first");
  Output x = b.Placeholder(DType::kF32, Shape{}, "x");
  {
    auto deps = b.ControlDependencies({first});
    Status s = LoopWithBody(b, b.Scalar<float>(0, "start"), [&](const Output& v) {
      Output neg = b.Op("Neg", {v}, {}, "neg");
      auto inner = b.ControlDependencies({neg});
      return Outputs{b.Op("Add", {v, x}, {}, "add")};
    });
    ASSERT_TRUE(s.ok()) << s.message();
    auto r = Cond(
        b, b.Placeholder(DType::kBool, Shape{}, "p"), [&]() -> Expected<Outputs> { return Outputs{b.Op("Neg", {x})}; },
        [&]() -> Expected<Outputs> { return Outputs{x}; });
    ASSERT_TRUE(r.ok()) << r.status().message();
  }
  EXPECT_EQ(NodeNamed(b, "start").inputs, (Strings{"^first"}));
  EXPECT_EQ(NodeNamed(b, "while/Enter").inputs, (Strings{"start", "^first"}));
  EXPECT_EQ(NodeNamed(b, "while/Merge").inputs, (Strings{"while/Enter", "while/NextIteration"}));
  EXPECT_EQ(NodeNamed(b, "while/neg").inputs, (Strings{"while/Identity"}));
  EXPECT_EQ(NodeNamed(b, "while/add").inputs, (Strings{"while/Identity", "while/Enter_1", "^while/neg"}));
  EXPECT_EQ(NodeNamed(b, "while/Exit").inputs, (Strings{"while/Switch"}));
  EXPECT_EQ(NodeNamed(b, "cond/Switch").inputs, (Strings{"p", "p", "^first"}));
  EXPECT_EQ(NodeNamed(b, "cond/Neg").inputs, (Strings{"cond/Switch_1:1"}));
  EXPECT_EQ(NodeNamed(b, "cond/Merge").inputs, (Strings{"cond/Switch_2", "cond/Neg"}));
  ExpectValidAndRoundTrips(b);
}

// A context of another kind, as the gradient builder's backward loops will
// be: it takes values of a context that does not enclose it (here, through
// an Identity standing where a stack pop would be).
class ForeignContext : public ControlFlowContext {
 public:
  ForeignContext() : ControlFlowContext("backward") {}
  std::string Describe() const override { return "backward 'backward'"; }
  Output pivot() const override { return Output(); }
  Expected<Output> CaptureFromOuter(GraphBuilder& b, const Output& value) override {
    return b.Op("Identity", {value}, {}, "from_outer");
  }
  Expected<Output> CaptureForeign(GraphBuilder& b, const Output& value, const ControlFlowContext* from) override {
    if (from == nullptr || from->Describe() != "while loop 'while'") return Output();
    return b.Op("Identity", {value}, {}, "popped");
  }
};

TEST(ControlFlowContexts, OtherKindsOfContextChooseHowValuesCrossIn) {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{}, "x");
  Output inside;
  ASSERT_TRUE(LoopWithBody(b, x, [&](const Output& v) {
                inside = b.Op("Neg", {v}, {}, "neg");
                return Outputs{inside};
              }).ok());
  EXPECT_EQ(b.Capture(x)->name(), "x");  // already visible at the top level
  ControlFlowContext* backward = b.AddContext(std::make_unique<ForeignContext>());
  {
    auto enter = b.EnterContext(backward);
    EXPECT_EQ(b.current_context(), backward);
    Output sum = b.Op("Add", {inside, x}, {}, "sum");
    Output again = b.Op("Add", {inside, x}, {}, "again");
    ASSERT_TRUE(b.status().ok()) << b.status().message();
    // Each value crosses once, with the context's name scope.
    EXPECT_EQ(b.node_def(sum.node()).inputs, (Strings{"backward/popped", "backward/from_outer"}));
    EXPECT_EQ(b.node_def(again.node()).inputs, (Strings{"backward/popped", "backward/from_outer"}));
    // No pivot: a constant gets no control input.
    EXPECT_TRUE(b.node_def(b.Scalar<float>(1, "c").node()).inputs.empty());
  }
  EXPECT_EQ(b.current_context(), nullptr);
  ExpectValidAndRoundTrips(b);
}

}  // namespace
}  // namespace weft
