// Authentication of the connections between the tasks of a cluster: a
// mutual challenge-response over the cluster's shared secret, run on every
// new connection before a single other message is read (docs/distributed.md,
// "Security").
//
//   client                                   server
//   Hello   "WFA1" 1 | client nonce    --->
//                                      <---  "WFA1" 2 | server nonce | server MAC
//   (checks the server MAC)
//   Proof   "WFA1" 3 | client MAC      --->  (checks the client MAC)
//
// server MAC = HMAC-SHA256(secret, "weft auth v1: server" | client nonce | server nonce)
// client MAC = HMAC-SHA256(secret, "weft auth v1: client" | client nonce | server nonce)
//
// Each side proves it knows the secret over a nonce the other chose fresh
// (32 bytes from OpenSSL's RAND_bytes), so a recorded handshake cannot be
// replayed, and the two labels differ, so one side's answer cannot be
// reflected back as the other's. The secret never crosses the wire. MACs
// are compared in constant time. Frames are transport headers with no
// payload, at most kAuthMaxFrame bytes: the RPC layer holds a connection
// that has not authenticated to that limit (Connection::SetMaxMessage).
//
// These classes are the protocol alone, without I/O, so that the fuzz
// target (tests/fuzz/auth_fuzzer.cc) and the tests drive them directly;
// RpcNode (core/distributed/rpc.cc) runs them on its connections.
#ifndef WEFT_CORE_DIST_AUTH_H_
#define WEFT_CORE_DIST_AUTH_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "core/base/status.h"

namespace weft::dist {

inline constexpr std::size_t kAuthNonceBytes = 32;
inline constexpr std::size_t kAuthMacBytes = 32;
// The largest handshake frame (the server's, 69 bytes), with room to spare.
inline constexpr uint64_t kAuthMaxFrame = 128;
// The shortest and longest secret a secret_file may hold.
inline constexpr std::size_t kMinSecretBytes = 16;
inline constexpr std::size_t kMaxSecretBytes = 4096;

// Reads the cluster secret from |path|, without trailing white space.
// Refused, naming the file: missing or unreadable; not a regular file;
// readable or writable by its group or others (the mode, and `chmod 600`);
// shorter than kMinSecretBytes or longer than kMaxSecretBytes.
Expected<std::string> ReadSecretFile(const std::string& path);

// Whether |frame| starts like a handshake frame: how a task without a
// secret tells a peer that has one from garbage, to say so.
bool LooksLikeAuthFrame(std::string_view frame);

// What a task without a secret answers a handshake with before it hangs
// up, so that the client fails at once, saying why, instead of retrying.
std::string AuthRefusalFrame();
bool IsAuthRefusal(std::string_view frame);

// What a task sends a new connection it turns away because too many others
// are in their handshake (a flood of connections), before it hangs up: the
// client then names the flood, not its credentials. Sent with or without a
// secret; a client reads it in place of the challenge or of Hello's answer.
std::string BusyFrame();
bool IsBusyFrame(std::string_view frame);

// The connecting side.
class AuthClient {
 public:
  explicit AuthClient(std::string secret) : secret_(std::move(secret)) {}
  // The first frame, with a fresh nonce.
  Expected<std::string> Start();
  // Checks the server's challenge; the proof frame to send back, or
  // UNAUTHENTICATED when the server does not know the secret.
  Expected<std::string> Answer(std::string_view challenge);

 private:
  std::string secret_;
  std::string client_nonce_;
};

// The accepting side: fed each frame the peer sends until authenticated().
class AuthServer {
 public:
  explicit AuthServer(std::string secret) : secret_(std::move(secret)) {}
  // The frame to send back (empty when none is due), or why the peer is
  // refused (UNAUTHENTICATED): a frame out of turn, of the wrong size or
  // magic, or a proof that does not match. After a refusal every frame is
  // refused.
  Expected<std::string> OnFrame(std::string_view frame);
  bool authenticated() const { return state_ == State::kDone; }

 private:
  enum class State { kHello, kProof, kDone, kRefused };
  Status Refuse(std::string why);
  std::string secret_;
  std::string client_nonce_;
  std::string server_nonce_;
  State state_ = State::kHello;
};

}  // namespace weft::dist

#endif  // WEFT_CORE_DIST_AUTH_H_
