// What a core's resolver answers from without asking anyone: the hosts file and the cache of
// earlier answers. Both are plain per-core data (one loop thread).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <cogwheel/io/address.hpp>
#include <cogwheel/runtime/time.hpp>

#include "resolver.hpp"

namespace cogwheel::detail {

// A name as the resolver compares it: ASCII lower case, without one trailing dot.
std::string normalized_name(std::string_view name);

// The addresses a hosts file (hosts(5): "address name aliases... # comment") gives each name.
class hosts_table {
 public:
  // Reads `path` (a missing or unreadable file is an empty table).
  static hosts_table load(const std::string& path);

  // Every address the file lists for `name` (normalized), in file order, or nullptr when the
  // file does not mention the name.
  const std::vector<socket_address>* find(const std::string& name) const;
  std::size_t size() const noexcept { return names_.size(); }

 private:
  std::unordered_map<std::string, std::vector<socket_address>> names_;
};

// Answers by (name, family), each until its expiry on the loop's clock. At most `capacity`
// entries: when full, expired entries go first, then an arbitrary one (a bound, not an LRU).
class answer_cache {
 public:
  explicit answer_cache(std::size_t capacity) : capacity_(capacity) {}

  // The answer for `key` still valid at `now`, or nullptr (an expired entry is dropped).
  const lookup_answer* find(const std::string& key, clock::time_point now);
  // Keeps `a` for `key` until `expiry` (replacing what was there). A no-op at capacity 0.
  void store(const std::string& key, const lookup_answer& a, clock::time_point expiry, clock::time_point now);
  std::size_t size() const noexcept { return entries_.size(); }

 private:
  struct entry {
    lookup_answer answer;
    clock::time_point expiry;
  };
  std::unordered_map<std::string, entry> entries_;
  std::size_t capacity_;
};

// The cache key of a lookup: the normalized name, a dot when it was written with its trailing
// dot (absolute: "svc." and "svc" are different lookups under a search list), and the family.
std::string lookup_key(const std::string& normalized, bool absolute, int family);

}  // namespace cogwheel::detail
