// A registry of plugin-provided things by key: device plugins by device
// type ("CPU"), transports by URL scheme ("tcp"), optimizers by name
// ("adam"). Keys are unique; a second registration names both owners.
#ifndef WEFT_CORE_PLUGIN_REGISTRY_H_
#define WEFT_CORE_PLUGIN_REGISTRY_H_

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"

namespace weft::plugin {

template <class T>
class Registry {
 public:
  // |what| names the key in messages: "device type", "transport scheme".
  explicit Registry(std::string what) : what_(std::move(what)) {}

  // Adds |value| under |key|, owned by |owner| (a plugin name and path, for
  // messages). ALREADY_EXISTS when the key is taken.
  Status Add(const std::string& key, std::unique_ptr<T> value, const std::string& owner) {
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      return AlreadyExistsError(what_, " '", key, "' is already provided by ", it->second.owner);
    }
    entries_.emplace(key, Entry{std::move(value), owner});
    return Status();
  }

  // The value under |key|, or nullptr.
  const T* Find(std::string_view key) const {
    auto it = entries_.find(std::string(key));
    return it == entries_.end() ? nullptr : it->second.value.get();
  }

  // Every value, ordered by key.
  std::vector<const T*> All() const {
    std::vector<const T*> out;
    for (const auto& [key, entry] : entries_) out.push_back(entry.value.get());
    return out;
  }

  std::size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::unique_ptr<T> value;
    std::string owner;
  };
  std::string what_;
  std::map<std::string, Entry, std::less<>> entries_;
};

}  // namespace weft::plugin

#endif  // WEFT_CORE_PLUGIN_REGISTRY_H_
