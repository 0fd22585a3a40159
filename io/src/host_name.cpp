// is_valid_host_name: the one check of a host name that every library boundary taking one uses
// (resolve(), connect(host, port), a TLS server name), so that no layer sees a name another
// would cut short (a C string ends at its first NUL: "localhost\0.evil.example" would be looked
// up, sent as SNI and checked against a certificate as "localhost").
#include <cogwheel/io/resolve.hpp>

namespace cogwheel {

namespace {

bool is_label_character(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

}  // namespace

bool is_valid_host_name(std::string_view name) {
  std::string_view ip = name;
  if (ip.size() > 2 && ip.front() == '[' && ip.back() == ']') ip = ip.substr(1, ip.size() - 2);
  if (ip.find(':') != std::string_view::npos) return socket_address::from_ip(ip, 0).has_value();
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);  // absolute: "example.com."
  if (name.empty() || name.size() > 253) return false;
  std::size_t label = 0;
  for (const char c : name) {
    if (c == '.') {
      if (label == 0) return false;  // "..", or a leading dot
      label = 0;
    } else if (!is_label_character(c) || ++label > 63) {
      return false;
    }
  }
  return label != 0;
}

}  // namespace cogwheel
