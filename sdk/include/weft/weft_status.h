/* Weft plugin ABI: status codes.
 *
 * Errors cross the boundary as opaque `weft_status_t` handles made by the
 * host (weft_host_t.status_new), so a plugin never allocates a status the
 * host cannot free. NULL is OK. The codes are the canonical ones used by
 * gRPC, Abseil and TensorFlow, with the same numbers, and never change.
 *
 *   static weft_status_t check_inner(const weft_host_t* host, int64_t k, int64_t k2) {
 *     if (k == k2) return NULL;  // OK
 *     return host->status_new(WEFT_INVALID_ARGUMENT,
 *                             "MatMul: inner dimensions differ");  // the caller owns it
 *   }
 */
#ifndef WEFT_STATUS_H_
#define WEFT_STATUS_H_

#include "weft/weft_abi.h"

WEFT_EXTERN_C_BEGIN

typedef int32_t weft_code_t;

enum {
  WEFT_OK = 0,
  /* The operation was cancelled, typically because another node failed. */
  WEFT_CANCELLED = 1,
  WEFT_UNKNOWN = 2,
  /* The caller passed something wrong: a bad shape, attr or config value. */
  WEFT_INVALID_ARGUMENT = 3,
  WEFT_DEADLINE_EXCEEDED = 4,
  WEFT_NOT_FOUND = 5,
  WEFT_ALREADY_EXISTS = 6,
  WEFT_PERMISSION_DENIED = 7,
  /* Out of memory or another finite resource. */
  WEFT_RESOURCE_EXHAUSTED = 8,
  /* The system is not in a state the operation needs (e.g. an
   * uninitialised variable). */
  WEFT_FAILED_PRECONDITION = 9,
  WEFT_ABORTED = 10,
  /* The end of a sequence: a closed queue, the end of the input data. */
  WEFT_OUT_OF_RANGE = 11,
  WEFT_UNIMPLEMENTED = 12,
  /* A broken invariant: a bug in Weft or in a plugin. */
  WEFT_INTERNAL = 13,
  /* The service or hardware is not there. A plugin returns this from its
   * init or device_count when it cannot serve on this machine (no GPU, no
   * RDMA device): the host logs the reason and goes on without it. */
  WEFT_UNAVAILABLE = 14,
  /* Unrecoverable data loss or corruption (a bad checksum). */
  WEFT_DATA_LOSS = 15,
  WEFT_UNAUTHENTICATED = 16
};

/* The highest code defined; codes above it are reported as UNKNOWN. */
#define WEFT_CODE_MAX 16

/* The canonical upper-case name of |code| ("INVALID_ARGUMENT"), or
 * "UNKNOWN" for a code outside 0..WEFT_CODE_MAX. */
static inline const char* weft_code_name(weft_code_t code) {
  switch (code) {
    case WEFT_OK: return "OK";
    case WEFT_CANCELLED: return "CANCELLED";
    case WEFT_UNKNOWN: return "UNKNOWN";
    case WEFT_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case WEFT_DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case WEFT_NOT_FOUND: return "NOT_FOUND";
    case WEFT_ALREADY_EXISTS: return "ALREADY_EXISTS";
    case WEFT_PERMISSION_DENIED: return "PERMISSION_DENIED";
    case WEFT_RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case WEFT_FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case WEFT_ABORTED: return "ABORTED";
    case WEFT_OUT_OF_RANGE: return "OUT_OF_RANGE";
    case WEFT_UNIMPLEMENTED: return "UNIMPLEMENTED";
    case WEFT_INTERNAL: return "INTERNAL";
    case WEFT_UNAVAILABLE: return "UNAVAILABLE";
    case WEFT_DATA_LOSS: return "DATA_LOSS";
    case WEFT_UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN";
  }
}

WEFT_EXTERN_C_END

#endif /* WEFT_STATUS_H_ */
