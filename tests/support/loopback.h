// Raw TCP sockets on 127.0.0.1 for tests of what listens there: free ports,
// listeners that never accept, plain clients, and bounded reads and writes
// of bytes a test speaks by hand. tools/bench's raw-socket peer (the
// baseline of its transfer benchmarks) is built on these too, so this file
// uses nothing of GoogleTest.
#ifndef WEFT_TESTS_SUPPORT_LOOPBACK_H_
#define WEFT_TESTS_SUPPORT_LOOPBACK_H_

#include <chrono>
#include <cstddef>
#include <string>

namespace weft::testing {

// A loopback port nothing listens on right now (bound, read, closed), never
// one this process was given before.
int FreePort();
// A socket bound to a free loopback port, written to |port|; it listens
// with |backlog| unless that is negative. The caller closes it.
int RawListener(int backlog, int* port);
// A connected socket to 127.0.0.1:|port|, or -1.
int RawConnect(int port);

// Sends all |n| bytes of |data| to |fd|, blocking; false when the peer is
// gone.
bool SendAll(int fd, const void* data, size_t n);
// Receives exactly |n| bytes from |fd| into |data|, blocking; false at the
// end of the stream or on an error.
bool RecvAll(int fd, void* data, size_t n);
// Writes all of |bytes| to |fd|; false when the peer is gone.
bool WriteAll(int fd, const std::string& bytes);
// Reads exactly |n| bytes into |out|, waiting at most |timeout|; false on
// the end of the stream or when the time passes.
bool ReadExactly(int fd, std::string* out, size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(5));
// Whether the other end closed |fd| within |timeout| (reading and dropping
// whatever else comes).
bool ClosedByPeer(int fd, std::chrono::milliseconds timeout = std::chrono::seconds(5));

}  // namespace weft::testing

#endif  // WEFT_TESTS_SUPPORT_LOOPBACK_H_
