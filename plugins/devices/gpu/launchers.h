// Host-callable launchers of the shared data-movement kernels
// (gpu/kernels/array.h), for code built by the plain C++ compiler: the
// cuDNN convolutions permute filters and pad inputs with them.
#ifndef WEFT_PLUGINS_DEVICES_GPU_LAUNCHERS_H_
#define WEFT_PLUGINS_DEVICES_GPU_LAUNCHERS_H_

#include <cstddef>
#include <vector>

#include "gpu/gpu_runtime.h"
#include "gpu/kernel_framework.h"

namespace weft::gpu {

// Enqueues |out| = |in| with its axes permuted: output axis i is input axis
// perm[i]. Elements are |element_size| bytes (1, 2, 4 or 8).
void EnqueueTranspose(rt::Stream stream, const void* in, const Dims& in_dims, const std::vector<int>& perm,
                      std::size_t element_size, void* out);

// Enqueues a copy of the box of extent |box| starting at |src_start| in
// |src| (a dense tensor of |src_dims|) to |dst_start| in |dst| (dense, of
// |dst_dims|); all four have one rank. Pads (into a zeroed, larger |dst|)
// and crops (out of a larger |src|).
void EnqueueCopyBox(rt::Stream stream, const void* src, const Dims& src_dims, const Dims& src_start, void* dst,
                    const Dims& dst_dims, const Dims& dst_start, const Dims& box, std::size_t element_size);

}  // namespace weft::gpu

#endif  // WEFT_PLUGINS_DEVICES_GPU_LAUNCHERS_H_
