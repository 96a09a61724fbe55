// XNNPACK's memory in the lite build (xnn_memory.h, docs/lite.md).
//
// An operator packs its weights into memory it has just allocated, after
// zeroing it, on the first run: for MobileNet-v2 that is 14 MB touched for
// the first time, page by page, and the page faults were a third of the
// time from start to the first result. Blocks of 64 KiB and more therefore
// come from regions of 32 MiB (or one block's size) mapped at a 2 MiB
// boundary and advised MADV_HUGEPAGE, where the kernel can back them with
// 2 MiB pages: one fault instead of 512. Blocks are placed one after the
// other; a region is unmapped when its last block is freed (operators die
// with their session), so nothing stays behind a session. Smaller blocks,
// and anything when a region cannot be mapped, come from malloc. Where the
// kernel gives no huge pages (transparent_hugepage "never"), the regions
// fault 4 KiB pages as malloc's memory would.
#include "xnn_memory.h"

#include <malloc.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace weft::cpu {
namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;
constexpr std::size_t kRegionSize = std::size_t{32} << 20;
constexpr std::size_t kLargeBlock = std::size_t{64} << 10;
// Before each block in a region: its size. Blocks are kAlign-aligned.
constexpr std::size_t kAlign = 64;
constexpr std::size_t kHeader = kAlign;

struct Region {
  char* base = nullptr;
  std::size_t size = 0;
  std::size_t used = 0;
  std::size_t live = 0;  // blocks not yet freed
};

std::size_t RoundUp(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

class HugeArena {
 public:
  void* Allocate(std::size_t alignment, std::size_t size) {
    if (size < kLargeBlock || alignment > kAlign) return System(alignment, size);
    const std::size_t need = kHeader + RoundUp(size, kAlign);
    std::lock_guard<std::mutex> lock(mutex_);
    Region* r = regions_.empty() ? nullptr : &regions_.back();
    if (r == nullptr || r->size - r->used < need) {
      r = Map(std::max(kRegionSize, need));
      if (r == nullptr) return System(alignment, size);
    }
    char* header = r->base + r->used;
    std::memcpy(header, &size, sizeof size);
    r->used += need;
    ++r->live;
    return header + kHeader;
  }

  void Free(void* p) {
    if (p == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex_);
    auto r = Find(p);
    if (r == regions_.end()) {
      std::free(p);
      return;
    }
    if (--r->live == 0) {
      ::munmap(r->base, r->size);
      regions_.erase(r);
    }
  }

  void* Reallocate(void* p, std::size_t size) {
    if (p == nullptr) return Allocate(kAlign, size);
    std::size_t old = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto r = Find(p);
      if (r == regions_.end()) {
        if (size < kLargeBlock) return std::realloc(p, size);
        old = malloc_usable_size(p);
      } else {
        std::memcpy(&old, static_cast<char*>(p) - kHeader, sizeof old);
      }
    }
    void* moved = Allocate(kAlign, size);
    if (moved == nullptr) return nullptr;  // |p| stays, as XNNPACK expects
    std::memcpy(moved, p, std::min(old, size));
    Free(p);
    return moved;
  }

 private:
  static void* System(std::size_t alignment, std::size_t size) {
    void* p = nullptr;
    return posix_memalign(&p, std::max(alignment, sizeof(void*)), std::max<std::size_t>(size, 1)) == 0 ? p : nullptr;
  }

  // A new region of |size| bytes, last in regions_.
  Region* Map(std::size_t size) {
    char* base = static_cast<char*>(MapHugePages(size));
    if (base == nullptr) return nullptr;
    regions_.push_back(Region{base, size, 0, 0});
    return &regions_.back();
  }

  std::vector<Region>::iterator Find(const void* p) {
    const char* c = static_cast<const char*>(p);
    return std::find_if(regions_.begin(), regions_.end(),
                        [c](const Region& r) { return c >= r.base && c < r.base + r.size; });
  }

  std::mutex mutex_;
  std::vector<Region> regions_;  // new blocks go into the last
};

}  // namespace

void* MapHugePages(std::size_t& size) {
  size = RoundUp(size, kHugePage);
  void* raw =
      ::mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  char* start = static_cast<char*>(raw);
  char* base = reinterpret_cast<char*>(RoundUp(reinterpret_cast<std::uintptr_t>(start), kHugePage));
  if (base > start) ::munmap(start, static_cast<std::size_t>(base - start));
  const std::size_t tail = static_cast<std::size_t>(start + size + kHugePage - (base + size));
  if (tail > 0) ::munmap(base + size, tail);
  ::madvise(base, size, MADV_HUGEPAGE);  // advice: without it, 4 KiB pages
  return base;
}

namespace {

HugeArena& Arena() {
  static HugeArena* arena = new HugeArena();  // never destroyed: operators may outlive static destructors
  return *arena;
}

}  // namespace

const xnn_allocator* XnnAllocator() {
  static const xnn_allocator allocator = {
      /*context=*/nullptr,
      /*allocate=*/[](void*, size_t size) { return Arena().Allocate(kAlign, size); },
      /*reallocate=*/[](void*, void* pointer, size_t size) { return Arena().Reallocate(pointer, size); },
      /*deallocate=*/[](void*, void* pointer) { Arena().Free(pointer); },
      /*aligned_allocate=*/[](void*, size_t alignment, size_t size) { return Arena().Allocate(alignment, size); },
      /*aligned_deallocate=*/[](void*, void* pointer) { Arena().Free(pointer); },
  };
  return &allocator;
}

}  // namespace weft::cpu
