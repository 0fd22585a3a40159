// Whether a given child process listens on a loopback TCP port. A test that picks a free port
// (bind to 0, close) and hands it to a server it starts (redis-server, openssl s_server) races
// every other process on the machine: the port is free when picked, not when the server binds
// it. Connecting to "whoever answers" would then talk to a stranger (a parallel test's server),
// hang on its silence or share its state. Asking the kernel which process owns the listening
// socket removes the race: ready means *this* child listens.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

namespace cogwheel::test_support {

// True when a socket of `pid` listens on `port`: a LISTEN (0A) entry of /proc/net/tcp or tcp6
// for the port whose inode is one of pid's descriptors.
inline bool pid_listens_on(pid_t pid, std::uint16_t port) {
  std::vector<std::string> inodes;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream tcp(table);
    std::string line;
    std::getline(tcp, line);  // the header
    while (std::getline(tcp, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
      const auto colon = local.find(':');
      if (state != "0A" || colon == std::string::npos) continue;
      if (std::stoul(local.substr(colon + 1), nullptr, 16) == port) inodes.push_back("socket:[" + inode + "]");
    }
  }
  if (inodes.empty()) return false;
  std::error_code ec;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    const std::string target = std::filesystem::read_symlink(fd.path(), ec).string();
    for (const std::string& inode : inodes)
      if (target == inode) return true;
  }
  return false;
}

}  // namespace cogwheel::test_support
