// The rdma plugin's TCP side channel: plain POSIX sockets used to set up a
// connection (the handshake of handshake.h) and, afterwards, to notice the
// peer going away. No verbs here.
//
// Every function throws weft::sdk::Error with the failing call and errno's
// text; the timeouts are in milliseconds from the call.
#ifndef WEFT_PLUGINS_TRANSPORTS_RDMA_SIDE_CHANNEL_H_
#define WEFT_PLUGINS_TRANSPORTS_RDMA_SIDE_CHANNEL_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace weft::rdma {

// A listening socket bound to |host|:|port| (port 0: any). Returns the fd.
int ListenOn(const std::string& host, uint16_t port);
// The port a socket is bound to.
uint16_t LocalPort(int fd);
// Connects to |host|:|port| within |timeout_ms|: DEADLINE_EXCEEDED when it
// takes longer, UNAVAILABLE when refused or unreachable.
int ConnectTo(const std::string& host, uint16_t port, int64_t timeout_ms);
// Accepts one pending connection; returns the fd and sets |peer| to
// "HOST:PORT".
int AcceptFrom(int listen_fd, std::string* peer);
// Writes or reads exactly |size| bytes within |timeout_ms|. Reading fails
// with UNAVAILABLE when the peer closes first.
void WriteAll(int fd, const void* data, std::size_t size, int64_t timeout_ms);
void ReadAll(int fd, void* data, std::size_t size, int64_t timeout_ms);
// Closes |fd| if it is not -1.
void CloseFd(int fd);

}  // namespace weft::rdma

#endif  // WEFT_PLUGINS_TRANSPORTS_RDMA_SIDE_CHANNEL_H_
