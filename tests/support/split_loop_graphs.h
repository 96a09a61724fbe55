// Loops whose marked parts are pinned to a device, for the tests that split
// a loop across devices (loop_devices_test) or tasks (dist_loop_test) and
// compare with the same graph unpinned. Each builder takes the device of
// the marked parts (empty: no pins) and returns the names to fetch.
#ifndef WEFT_TESTS_SUPPORT_SPLIT_LOOP_GRAPHS_H_
#define WEFT_TESTS_SUPPORT_SPLIT_LOOP_GRAPHS_H_

#include <string>
#include <utility>
#include <vector>

#include "core/graph/builder.h"

namespace weft::testing {

using Feeds = std::vector<std::pair<std::string, Tensor>>;

// Deterministic f32 values in [-scale, scale]: scale * sin(1.3 i + phase).
Tensor Wavy(const Shape& shape, float scale, float phase);

// h = tanh(h W + x_t) over the 12 rows of xs ([12, 3, 4], fed "xs"), from
// h0 ([3, 4], "h0"), W [4, 4] ("w"); the MatMul ("while/product") on
// |device|, the loop's counter where unpinned nodes go. Fetches h and
// "loss" = sum(h * h), and with |with_gradient| the gradients of the loss
// with respect to w, h0 and xs.
std::vector<std::string> Recurrence(GraphBuilder& b, const std::string& device, bool with_gradient,
                                    int parallel_iterations = 4);

// Feeds for Recurrence: xs, w and h0 from Wavy.
const Feeds& RecurrenceFeeds();

// for i < 9: v = (i % 3 == 0) ? v * 2 (on |device|, "twice") : v - 1, then
// an inner loop adds i to v twice (its body on |device|), from x (f32 [2],
// fed "x"): dead values cross the cut in the iterations that take the
// other branch, and the inner frame's transfers are keyed by the outer
// iteration too. Fetches v.
std::vector<std::string> CondAndNestedLoop(GraphBuilder& b, const std::string& device);

// What CondAndNestedLoop computes from |x|, by hand: i = 0..8; i % 3 == 0
// doubles, else subtracts 1; then adds 2i.
std::vector<float> CondAndNestedLoopByHand(std::vector<float> x);

}  // namespace weft::testing

#endif  // WEFT_TESTS_SUPPORT_SPLIT_LOOP_GRAPHS_H_
