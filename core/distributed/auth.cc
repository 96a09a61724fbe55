#include "core/distributed/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/base/strings.h"

namespace weft::dist {
namespace {

constexpr std::string_view kMagic = "WFA1";
constexpr char kHello = 1, kChallenge = 2, kProof = 3, kNoSecret = 4, kBusy = 5;
constexpr std::size_t kHelloSize = kMagic.size() + 1 + kAuthNonceBytes;
constexpr std::size_t kChallengeSize = kMagic.size() + 1 + kAuthNonceBytes + kAuthMacBytes;
constexpr std::size_t kProofSize = kMagic.size() + 1 + kAuthMacBytes;
static_assert(kChallengeSize <= kAuthMaxFrame);

Status Unauthenticated(std::string why) { return Status(Code::kUnauthenticated, std::move(why)); }

Expected<std::string> Nonce() {
  std::string nonce(kAuthNonceBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), static_cast<int>(nonce.size())) != 1) {
    return InternalError("OpenSSL's RAND_bytes could not make a nonce for the handshake");
  }
  return nonce;
}

std::string Mac(const std::string& secret, std::string_view label, const std::string& client_nonce,
                const std::string& server_nonce) {
  std::string data;
  data.reserve(label.size() + client_nonce.size() + server_nonce.size());
  data.append(label).append(client_nonce).append(server_nonce);
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &size);
  return std::string(reinterpret_cast<const char*>(out), size);
}

constexpr std::string_view kServerLabel = "weft auth v1: server";
constexpr std::string_view kClientLabel = "weft auth v1: client";

std::string Frame(char type, std::string_view body1, std::string_view body2 = {}) {
  std::string frame(kMagic);
  frame.push_back(type);
  frame.append(body1).append(body2);
  return frame;
}

bool SameBytes(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

const char* TypeName(char type) {
  switch (type) {
    case kHello: return "hello";
    case kChallenge: return "challenge";
    case kProof: return "proof";
    case kNoSecret: return "no-secret";
    case kBusy: return "busy";
    default: return "unknown";
  }
}

// Checks magic, type and size; an error saying what was wrong.
Status CheckFrame(std::string_view frame, char type, std::size_t size) {
  if (!frame.starts_with(kMagic) || frame.size() <= kMagic.size()) {
    return Unauthenticated(StrCat("sent ", frame.size(), " bytes that are not a Weft handshake (expected the ",
                                  TypeName(type), " frame)"));
  }
  if (frame[kMagic.size()] != type) {
    return Unauthenticated(
        StrCat("sent a ", TypeName(frame[kMagic.size()]), " frame where the ", TypeName(type), " frame was due"));
  }
  if (frame.size() != size) {
    return Unauthenticated(StrCat("sent a ", TypeName(type), " frame of ", frame.size(), " bytes instead of ", size));
  }
  return Status();
}

}  // namespace

Expected<std::string> ReadSecretFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int error = errno;
    if (error == ENOENT) {
      return NotFoundError("[cluster] secret_file ", Quote(path),
                           " does not exist; create it with e.g. `head -c 32 /dev/urandom | base64 > ", path,
                           " && chmod 600 ", path, "` and copy it to every machine of the cluster");
    }
    return Status(Code::kPermissionDenied, StrCat("[cluster] secret_file ", Quote(path), ": ", std::strerror(error)));
  }
  if (!S_ISREG(st.st_mode)) return InvalidArgumentError("[cluster] secret_file ", Quote(path), " is not a file");
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Status(
        Code::kPermissionDenied,
        StrCat("[cluster] secret_file ", Quote(path), " may be read or written by others (mode ", mode,
               "): anyone who reads it can join the cluster and run graphs on it; run `chmod 600 ", path, "`"));
  }
  if (st.st_size > static_cast<off_t>(kMaxSecretBytes + 64)) {
    return InvalidArgumentError("[cluster] secret_file ", Quote(path), " holds ", st.st_size,
                                " bytes; a secret is at most ", kMaxSecretBytes);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(Code::kPermissionDenied, StrCat("[cluster] secret_file ", Quote(path), " cannot be read"));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  std::string secret = buffer.str();
  while (!secret.empty() &&
         (secret.back() == '\n' || secret.back() == '\r' || secret.back() == ' ' || secret.back() == '\t')) {
    secret.pop_back();
  }
  if (secret.size() < kMinSecretBytes) {
    return InvalidArgumentError("[cluster] secret_file ", Quote(path), " holds a secret of ", secret.size(),
                                " bytes; use at least ", kMinSecretBytes,
                                " random bytes (e.g. `head -c 32 /dev/urandom | base64`)");
  }
  if (secret.size() > kMaxSecretBytes) {
    return InvalidArgumentError("[cluster] secret_file ", Quote(path), " holds a secret of ", secret.size(),
                                " bytes; a secret is at most ", kMaxSecretBytes);
  }
  return secret;
}

bool LooksLikeAuthFrame(std::string_view frame) { return frame.starts_with(kMagic); }

std::string AuthRefusalFrame() { return Frame(kNoSecret, {}); }

bool IsAuthRefusal(std::string_view frame) { return frame == AuthRefusalFrame(); }

std::string BusyFrame() { return Frame(kBusy, {}); }

bool IsBusyFrame(std::string_view frame) { return frame == BusyFrame(); }

Expected<std::string> AuthClient::Start() {
  WEFT_ASSIGN_OR_RETURN(client_nonce_, Nonce());
  return Frame(kHello, client_nonce_);
}

Expected<std::string> AuthClient::Answer(std::string_view challenge) {
  if (client_nonce_.empty()) return InternalError("AuthClient::Answer before Start");
  Status frame = CheckFrame(challenge, kChallenge, kChallengeSize);
  if (!frame.ok()) return Unauthenticated(StrCat("the task ", frame.message()));
  const std::string server_nonce(challenge.substr(kMagic.size() + 1, kAuthNonceBytes));
  const std::string_view server_mac = challenge.substr(kMagic.size() + 1 + kAuthNonceBytes);
  if (!SameBytes(server_mac, Mac(secret_, kServerLabel, client_nonce_, server_nonce))) {
    return Unauthenticated(
        "the task could not prove that it knows the cluster secret (its [cluster] secret_file holds another "
        "secret, or another program answers at that address)");
  }
  return Frame(kProof, Mac(secret_, kClientLabel, client_nonce_, server_nonce));
}

Status AuthServer::Refuse(std::string why) {
  state_ = State::kRefused;
  client_nonce_.clear();
  server_nonce_.clear();
  return Unauthenticated(std::move(why));
}

Expected<std::string> AuthServer::OnFrame(std::string_view frame) {
  switch (state_) {
    case State::kHello: {
      Status ok = CheckFrame(frame, kHello, kHelloSize);
      if (!ok.ok()) return Refuse(ok.message());
      client_nonce_.assign(frame.substr(kMagic.size() + 1));
      WEFT_ASSIGN_OR_RETURN(server_nonce_, Nonce());
      state_ = State::kProof;
      return Frame(kChallenge, server_nonce_, Mac(secret_, kServerLabel, client_nonce_, server_nonce_));
    }
    case State::kProof: {
      Status ok = CheckFrame(frame, kProof, kProofSize);
      if (!ok.ok()) return Refuse(ok.message());
      if (!SameBytes(frame.substr(kMagic.size() + 1), Mac(secret_, kClientLabel, client_nonce_, server_nonce_))) {
        return Refuse("sent a proof that does not match (a wrong secret, or a replayed handshake)");
      }
      state_ = State::kDone;
      client_nonce_.clear();
      server_nonce_.clear();
      return std::string();
    }
    case State::kDone: return InternalError("AuthServer::OnFrame after the peer authenticated");
    case State::kRefused: break;
  }
  return Unauthenticated("was refused already");
}

}  // namespace weft::dist
