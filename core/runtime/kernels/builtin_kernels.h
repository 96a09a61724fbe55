// The kernels the runtime runs itself, whatever the device (builtin_kernels.cc
// and the other files of core/runtime/kernels/); CreateKernel
// (core/runtime/op_kernel.cc) asks this table before the plugins.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "core/runtime/op_kernel.h"

namespace weft::runtime {

using KernelPtr = Expected<std::unique_ptr<OpKernel>>;
using RuntimeFactory = KernelPtr (*)(const Graph::Node&, const RuntimeDevice&);

// Every op the runtime runs itself, with what makes its kernel: the one
// list (IsRuntimeOp and RuntimeOps read it, so it cannot fall out of step
// with kernel creation).
const std::map<std::string, RuntimeFactory, std::less<>>& RuntimeKernels();

// The runtime's kernel for |node| (an op of RuntimeKernels()).
KernelPtr CreateRuntimeKernel(const Graph::Node& node, const RuntimeDevice& device);

}  // namespace weft::runtime
