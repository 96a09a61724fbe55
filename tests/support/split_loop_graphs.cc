#include "tests/support/split_loop_graphs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "core/grad/gradients.h"
#include "core/graph/control_flow.h"

namespace weft::testing {

using Outputs = std::vector<Output>;

Tensor Wavy(const Shape& shape, float scale, float phase) {
  std::vector<float> v(static_cast<std::size_t>(shape.num_elements()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = scale * std::sin(1.3f * static_cast<float>(i) + phase);
  return Tensor::FromVector<float>(v, shape);
}

std::vector<std::string> Recurrence(GraphBuilder& b, const std::string& device, bool with_gradient,
                                    int parallel_iterations) {
  Output xs = b.Placeholder(DType::kF32, Shape{12, 3, 4}, "xs");
  Output w = b.Placeholder(DType::kF32, Shape{4, 4}, "w");
  Output h0 = b.Placeholder(DType::kF32, Shape{3, 4}, "h0");
  WhileOptions options;
  options.parallel_iterations = parallel_iterations;
  auto r = WhileLoop(
      b,
      [&](const Outputs& v) -> Expected<Output> {
        return b.Op("Less", {v[0], b.Scalar<int64_t>(12)});
      },
      [&](const Outputs& v) -> Expected<Outputs> {
        Output product;
        {
          std::optional<GraphBuilder::Scope> pin;
          if (!device.empty()) pin.emplace(b.DeviceScope(device));
          product = b.Op("MatMul", {v[1], w}, {}, "product");
        }
        Output x_t = b.Op("Gather", {xs, v[0]}, {}, "x_t");
        return Outputs{b.Op("Add", {v[0], b.Scalar<int64_t>(1)}), b.Op("Tanh", {b.Op("Add", {product, x_t})})};
      },
      {b.Scalar<int64_t>(0), h0}, options);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return {};
  Output loss = b.Op("Sum", {b.Op("Mul", {(*r)[1], (*r)[1]})}, {}, "loss");
  std::vector<std::string> fetches = {(*r)[1].name(), "loss"};
  if (with_gradient) {
    auto g = grad::AddGradients(b, {loss}, {w, h0, xs});
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    if (!g.ok()) return {};
    for (const Output& o : *g) fetches.push_back(o.name());
  }
  return fetches;
}

const Feeds& RecurrenceFeeds() {
  static const Feeds feeds = {{"xs", Wavy(Shape{12, 3, 4}, 0.5f, 0.2f)},
                              {"w", Wavy(Shape{4, 4}, 0.6f, 1.1f)},
                              {"h0", Wavy(Shape{3, 4}, 0.4f, 2.3f)}};
  return feeds;
}

std::vector<std::string> CondAndNestedLoop(GraphBuilder& b, const std::string& device) {
  Output x = b.Placeholder(DType::kF32, Shape{2}, "x");
  auto r = WhileLoop(
      b,
      [&](const Outputs& v) -> Expected<Output> {
        return b.Op("Less", {v[0], b.Scalar<int32_t>(9)});
      },
      [&](const Outputs& v) -> Expected<Outputs> {
        Output third = b.Op("Equal", {b.Op("FloorMod", {v[0], b.Scalar<int32_t>(3)}), b.Scalar<int32_t>(0)});
        WEFT_ASSIGN_OR_RETURN(Outputs c, Cond(
                                             b, third,
                                             [&]() -> Expected<Outputs> {
                                               std::optional<GraphBuilder::Scope> pin;
                                               if (!device.empty()) pin.emplace(b.DeviceScope(device));
                                               return Outputs{b.Op("Mul", {v[1], b.Scalar<float>(2)}, {}, "twice")};
                                             },
                                             [&]() -> Expected<Outputs> {
                                               return Outputs{b.Op("Sub", {v[1], b.Scalar<float>(1)})};
                                             }));
        Output as_float = b.Op("Cast", {v[0]}, {{"DstT", AttrValue(DType::kF32)}});
        WhileOptions inner;
        inner.name = "inner";
        WEFT_ASSIGN_OR_RETURN(
            Outputs in,
            WhileLoop(
                b,
                [&](const Outputs& u) -> Expected<Output> {
                  return b.Op("Less", {u[0], b.Scalar<int32_t>(2)});
                },
                [&](const Outputs& u) -> Expected<Outputs> {
                  std::optional<GraphBuilder::Scope> pin;
                  if (!device.empty()) pin.emplace(b.DeviceScope(device));
                  return Outputs{b.Op("Add", {u[0], b.Scalar<int32_t>(1)}), b.Op("Add", {u[1], as_float}, {}, "add_i")};
                },
                {b.Scalar<int32_t>(0), c[0]}, inner));
        return Outputs{b.Op("Add", {v[0], b.Scalar<int32_t>(1)}), in[1]};
      },
      {b.Scalar<int32_t>(0), x});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return {};
  return {(*r)[1].name()};
}

std::vector<float> CondAndNestedLoopByHand(std::vector<float> x) {
  for (int i = 0; i < 9; ++i) {
    for (float& e : x) e = (i % 3 == 0 ? e * 2 : e - 1) + 2.0f * static_cast<float>(i);
  }
  return x;
}

}  // namespace weft::testing
