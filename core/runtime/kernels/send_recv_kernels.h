// The runtime's kernels for _Send and _Recv (see rendezvous.h), which work
// on every device: a _Send hands its input to the step's rendezvous; a
// _Recv waits for it and moves it into its own device's memory — sharing
// the buffer between host-visible devices, with a peer copy when both
// devices belong to one plugin that offers it, and through host memory
// otherwise.
#ifndef WEFT_CORE_RUNTIME_SEND_RECV_KERNELS_H_
#define WEFT_CORE_RUNTIME_SEND_RECV_KERNELS_H_

#include <functional>
#include <memory>

#include "core/graph/graph.h"
#include "core/runtime/op_kernel.h"
#include "core/runtime/rendezvous.h"

namespace weft::runtime {

Expected<std::unique_ptr<OpKernel>> CreateSendRecvKernel(const Graph::Node& node, const RuntimeDevice& device);

// The rendezvous key of a _Send or _Recv node (of a valid graph) in the
// root frame: its sending device and incarnation, receiving device and edge.
RendezvousKey SendRecvKeyOf(const Graph::Node& node);

// |value|, which lives on |src| (nullptr: host memory), as a tensor |dst|
// kernels can read. Blocks until the copy is complete.
Expected<Tensor> TransferTensor(const Tensor& value, const RuntimeDevice* src, const RuntimeDevice& dst);

// The same without blocking: a copy out of device memory is watched with
// an event of the source's stream, and |done| is called (from any thread)
// when the value can be used on |dst| — for a device with its own memory,
// once the copy into it is enqueued on |dst|'s stream, ahead of the kernels
// that read it.
void TransferTensorAsync(const Tensor& value, const RuntimeDevice* src, const RuntimeDevice& dst,
                         std::function<void(Expected<Tensor>)> done);

}  // namespace weft::runtime

#endif  // WEFT_CORE_RUNTIME_SEND_RECV_KERNELS_H_
