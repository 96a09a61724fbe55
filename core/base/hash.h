// FNV-1a (64-bit): the core's one non-cryptographic hash, for names turned
// into seeds, rendezvous keys, frame ids and cluster fingerprints. Stable
// across runs, processes and machines of one build; never for anything an
// adversary picks (it is trivially collided).
//
//   Fnv1a h;
//   h.AddField(job);          // the bytes, then a separator byte, so that
//   h.AddField(address);      // ("ab", "c") and ("a", "bc") differ
//   uint64_t id = h.value();
#ifndef WEFT_CORE_BASE_HASH_H_
#define WEFT_CORE_BASE_HASH_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace weft {

class Fnv1a {
 public:
  static constexpr uint64_t kOffsetBasis = 0xcbf29ce484222325ull;
  static constexpr uint64_t kPrime = 0x100000001b3ull;

  void AddByte(unsigned char c) {
    h_ ^= c;
    h_ *= kPrime;
  }
  void Add(const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) AddByte(p[i]);
  }
  void Add(std::string_view s) { Add(s.data(), s.size()); }
  // |s| followed by a 0xff separator (a byte no UTF-8 text holds).
  void AddField(std::string_view s) {
    Add(s);
    AddByte(0xff);
  }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = kOffsetBasis;
};

// The FNV-1a hash of |s|.
inline uint64_t Fnv1aHash(std::string_view s) {
  Fnv1a h;
  h.Add(s);
  return h.value();
}

}  // namespace weft

#endif  // WEFT_CORE_BASE_HASH_H_
