#include "resolver_cache.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace cogwheel::detail {

std::string normalized_name(std::string_view name) {
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);
  std::string s(name);
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

hosts_table hosts_table::load(const std::string& path) {
  hosts_table t;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (const auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string address;
    if (!(words >> address)) continue;
    auto a = socket_address::from_ip(address, 0);
    if (!a) continue;  // not an address: the line is ignored, as the C library does
    for (std::string name; words >> name;) {
      auto& list = t.names_[normalized_name(name)];
      if (std::find(list.begin(), list.end(), *a) == list.end()) list.push_back(*a);
    }
  }
  return t;
}

const std::vector<socket_address>* hosts_table::find(const std::string& name) const {
  const auto it = names_.find(name);
  return it == names_.end() ? nullptr : &it->second;
}

const lookup_answer* answer_cache::find(const std::string& key, clock::time_point now) {
  const auto it = entries_.find(key);
  if (it == entries_.end()) return nullptr;
  if (it->second.expiry <= now) {
    entries_.erase(it);
    return nullptr;
  }
  return &it->second.answer;
}

void answer_cache::store(const std::string& key, const lookup_answer& a, clock::time_point expiry,
                         clock::time_point now) {
  if (capacity_ == 0 || expiry <= now) return;
  if (entries_.size() >= capacity_ && !entries_.contains(key)) {
    std::erase_if(entries_, [now](const auto& e) { return e.second.expiry <= now; });
    if (entries_.size() >= capacity_) entries_.erase(entries_.begin());
  }
  entries_.insert_or_assign(key, entry{a, expiry});
}

std::string lookup_key(const std::string& normalized, bool absolute, int family) {
  std::string key;
  key.reserve(normalized.size() + 3);
  key = normalized;
  if (absolute) key.push_back('.');
  key.push_back('/');
  key.push_back(family == AF_INET6 ? '6' : '4');
  return key;
}

}  // namespace cogwheel::detail
