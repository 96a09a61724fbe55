/* Weft plugin ABI: element types and tensor views.
 *
 * A tensor is a dtype, a shape and a buffer that the owning device's
 * allocator produced. Plugins see tensors through `weft_tensor_t`, a view
 * the host fills in: it lends the shape and the buffer, it never transfers
 * ownership.
 *
 * The dtype numbers are part of the ABI and never change. They are the
 * numbers TensorFlow uses for the same types, so graphs and tools that
 * speak TensorFlow's numbering need no translation table. Numbers not
 * listed here are reserved.
 */
#ifndef WEFT_TENSOR_H_
#define WEFT_TENSOR_H_

#include "weft/weft_abi.h"

WEFT_EXTERN_C_BEGIN

typedef int32_t weft_dtype_t;

enum {
  WEFT_DTYPE_INVALID = 0,
  WEFT_DTYPE_F32 = 1, /* IEEE 754 binary32 */
  WEFT_DTYPE_F64 = 2, /* IEEE 754 binary64 */
  WEFT_DTYPE_I32 = 3,
  WEFT_DTYPE_U8 = 4,
  WEFT_DTYPE_I16 = 5,
  WEFT_DTYPE_I8 = 6,
  WEFT_DTYPE_STRING = 7, /* elements are weft_string_t; host memory only */
  WEFT_DTYPE_I64 = 9,
  WEFT_DTYPE_BOOL = 10, /* one byte per element, 0 or 1 */
  WEFT_DTYPE_BF16 = 14, /* bfloat16: the top 16 bits of a binary32 */
  WEFT_DTYPE_F16 = 19,  /* IEEE 754 binary16 */
  /* A handle to a resource (a variable, a queue) owned by a device's
   * resource manager; host memory only, opaque to kernels, which reach the
   * resource through the kernel services. */
  WEFT_DTYPE_RESOURCE = 20
};

/* The largest rank a tensor may have. */
#define WEFT_MAX_RANK 8

/* One element of a STRING tensor: |size| bytes at |data|, not
 * NUL-terminated, lent by the tensor's owner. */
typedef struct weft_string_t {
  const char* data;
  uint64_t size;
} weft_string_t;

/* Size in bytes of one element of |dtype|; 0 for INVALID or an unknown
 * number. STRING elements are weft_string_t. */
static inline size_t weft_dtype_size(weft_dtype_t dtype) {
  switch (dtype) {
    case WEFT_DTYPE_F64:
    case WEFT_DTYPE_I64: return 8;
    case WEFT_DTYPE_F32:
    case WEFT_DTYPE_I32: return 4;
    case WEFT_DTYPE_F16:
    case WEFT_DTYPE_BF16:
    case WEFT_DTYPE_I16: return 2;
    case WEFT_DTYPE_U8:
    case WEFT_DTYPE_I8:
    case WEFT_DTYPE_BOOL: return 1;
    case WEFT_DTYPE_STRING: return sizeof(weft_string_t);
    case WEFT_DTYPE_RESOURCE: return sizeof(void*);
    default: return 0;
  }
}

/* The short lower-case name of |dtype| ("f32", "i64", "bool"), or NULL
 * for INVALID or an unknown number. */
static inline const char* weft_dtype_name(weft_dtype_t dtype) {
  switch (dtype) {
    case WEFT_DTYPE_F32: return "f32";
    case WEFT_DTYPE_F64: return "f64";
    case WEFT_DTYPE_I32: return "i32";
    case WEFT_DTYPE_U8: return "u8";
    case WEFT_DTYPE_I16: return "i16";
    case WEFT_DTYPE_I8: return "i8";
    case WEFT_DTYPE_STRING: return "string";
    case WEFT_DTYPE_I64: return "i64";
    case WEFT_DTYPE_BOOL: return "bool";
    case WEFT_DTYPE_BF16: return "bf16";
    case WEFT_DTYPE_F16: return "f16";
    case WEFT_DTYPE_RESOURCE: return "resource";
    default: return NULL;
  }
}

/* A view of a tensor, filled in by the host. The caller sets struct_size;
 * the host writes the members that fit. Everything is lent: the view is
 * valid until the kernel call or callback it was obtained in returns.
 *
 * Elements are dense and row-major (C order): element [i0, ..., ik] is at
 * index ((i0 * d1 + i1) * d2 + ...) from the first element. A kernel
 * writes only its outputs and temporaries, never its inputs. */
typedef struct weft_tensor_t {
  size_t struct_size;
  weft_dtype_t dtype;
  int32_t rank;
  /* |rank| dimension sizes, outermost first (C order). NULL when rank is
   * 0. A dimension may be 0, giving an empty tensor. */
  const int64_t* dims;
  /* The product of |dims| (1 for rank 0). */
  int64_t num_elements;
  /* num_elements * weft_dtype_size(dtype). */
  uint64_t byte_size;
  /* The device buffer holding the elements, and the byte offset of the
   * first element in it. NULL when byte_size is 0, and for a tensor the
   * host keeps in its own memory (a host-memory arg): use |data| then. */
  weft_buffer_t buffer;
  uint64_t offset;
  /* The host address of the first element when the buffer is host-visible
   * (CPU devices, unified memory), NULL otherwise. */
  void* data;
} weft_tensor_t;

#define WEFT_TENSOR_SIZE_V1_0 WEFT_STRUCT_SIZE_THROUGH(weft_tensor_t, data)

WEFT_EXTERN_C_END

#endif /* WEFT_TENSOR_H_ */
