#include "rdma/side_channel.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "weft/sdk/status.h"

namespace weft::rdma {

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void ThrowErrno(weft_code_t code, const std::string& what, int error) {
  throw sdk::Error(code, "rdma side channel: " + what + ": " + std::strerror(error));
}

struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list != nullptr) freeaddrinfo(list);
  }
};

void Resolve(const std::string& host, uint16_t port, bool passive, AddrInfo* out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &out->list);
  if (rc != 0) {
    throw sdk::Error(WEFT_UNAVAILABLE, "rdma side channel: cannot resolve '" + host + "': " + gai_strerror(rc));
  }
}

int RemainingMs(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(left > 1000000 ? 1000000 : left);
}

void WaitFor(int fd, short events, Clock::time_point deadline, const char* what) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int rc = poll(&p, 1, RemainingMs(deadline));
    if (rc > 0) return;
    if (rc == 0) throw sdk::Error(WEFT_DEADLINE_EXCEEDED, std::string("rdma side channel: timed out ") + what);
    if (errno != EINTR) ThrowErrno(WEFT_UNAVAILABLE, std::string("poll while ") + what, errno);
  }
}

std::string Describe(const sockaddr* addr) {
  char host[NI_MAXHOST] = "?";
  char service[NI_MAXSERV] = "?";
  const socklen_t size = addr->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  getnameinfo(addr, size, host, sizeof host, service, sizeof service, NI_NUMERICHOST | NI_NUMERICSERV);
  std::string out;
  if (addr->sa_family == AF_INET6) out.push_back('[');
  out.append(host);
  if (addr->sa_family == AF_INET6) out.push_back(']');
  out.push_back(':');
  out.append(service);
  return out;
}

}  // namespace

int ListenOn(const std::string& host, uint16_t port) {
  AddrInfo info;
  Resolve(host, port, true, &info);
  int last_error = 0;
  for (addrinfo* a = info.list; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = errno;
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 64) == 0) return fd;
    last_error = errno;
    close(fd);
  }
  ThrowErrno(WEFT_UNAVAILABLE, "cannot listen on " + host + ":" + std::to_string(port), last_error);
}

uint16_t LocalPort(int fd) {
  sockaddr_storage addr{};
  socklen_t size = sizeof addr;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &size) != 0) ThrowErrno(WEFT_INTERNAL, "getsockname", errno);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

int ConnectTo(const std::string& host, uint16_t port, int64_t timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
  AddrInfo info;
  Resolve(host, port, false, &info);
  const std::string where = host + ":" + std::to_string(port);
  int last_error = ECONNREFUSED;
  for (addrinfo* a = info.list; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      last_error = errno;
      continue;
    }
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last_error = errno;
        close(fd);
        continue;
      }
      try {
        WaitFor(fd, POLLOUT, deadline, ("connecting to " + where).c_str());
      } catch (...) {
        close(fd);
        throw;
      }
      int error = 0;
      socklen_t size = sizeof error;
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size);
      if (error != 0) {
        last_error = error;
        close(fd);
        continue;
      }
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
  }
  ThrowErrno(WEFT_UNAVAILABLE, "cannot connect to " + where, last_error);
}

int AcceptFrom(int listen_fd, std::string* peer) {
  sockaddr_storage addr{};
  socklen_t size = sizeof addr;
  const int fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&addr), &size, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) ThrowErrno(WEFT_UNAVAILABLE, "accept", errno);
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  *peer = Describe(reinterpret_cast<const sockaddr*>(&addr));
  return fd;
}

void WriteAll(int fd, const void* data, std::size_t size, int64_t timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = send(fd, p, size, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      size -= static_cast<std::size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      WaitFor(fd, POLLOUT, deadline, "writing");
    } else if (n < 0 && errno != EINTR) {
      ThrowErrno(WEFT_UNAVAILABLE, "send", errno);
    }
  }
}

void ReadAll(int fd, void* data, std::size_t size, int64_t timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
  auto* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = recv(fd, p, size, 0);
    if (n > 0) {
      p += n;
      size -= static_cast<std::size_t>(n);
    } else if (n == 0) {
      throw sdk::Error(WEFT_UNAVAILABLE, "rdma side channel: the peer closed the connection during setup");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      WaitFor(fd, POLLIN, deadline, "reading");
    } else if (errno != EINTR) {
      ThrowErrno(WEFT_UNAVAILABLE, "recv", errno);
    }
  }
}

void CloseFd(int fd) {
  if (fd >= 0) close(fd);
}

}  // namespace weft::rdma
