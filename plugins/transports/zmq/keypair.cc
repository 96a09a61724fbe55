// weft_zmq_keypair DIR: makes a CURVE key pair for a cluster's zmq links
// (docs/distributed.md, "Encryption"): DIR/curve.pub holds the public key
// for [transports.zmq] curve_public_key, DIR/curve.key (mode 0600) the
// secret key for curve_secret_key_file. Refuses to overwrite either.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

bool WriteFile(const std::string& path, const char* text, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) {
    std::fprintf(stderr, "weft_zmq_keypair: cannot create %s: %s\n", path.c_str(), std::strerror(errno));
    return false;
  }
  const std::string line = std::string(text) + "\n";
  const bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  if (!ok) std::fprintf(stderr, "weft_zmq_keypair: cannot write %s\n", path.c_str());
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 || std::strcmp(argv[1], "--help") == 0) {
    std::fprintf(stderr,
                 "usage: weft_zmq_keypair DIR\n"
                 "Writes a CURVE key pair for the zmq transport: DIR/curve.pub (the public key, for\n"
                 "[transports.zmq] curve_public_key) and DIR/curve.key (the secret key, mode 0600, for\n"
                 "curve_secret_key_file). Copy both to every machine of the cluster.\n");
    return argc == 2 ? 0 : 2;
  }
  if (!zmq_has("curve")) {
    std::fprintf(stderr, "weft_zmq_keypair: this libzmq was built without CURVE\n");
    return 1;
  }
  char public_key[41] = {}, secret_key[41] = {};
  if (zmq_curve_keypair(public_key, secret_key) != 0) {
    std::fprintf(stderr, "weft_zmq_keypair: zmq_curve_keypair failed: %s\n", zmq_strerror(zmq_errno()));
    return 1;
  }
  const std::string dir = argv[1];
  if (!WriteFile(dir + "/curve.key", secret_key, 0600)) return 1;
  if (!WriteFile(dir + "/curve.pub", public_key, 0644)) return 1;
  std::printf("%s\n", public_key);
  return 0;
}
