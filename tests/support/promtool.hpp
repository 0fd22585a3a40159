// `promtool check metrics` (Debian's prometheus package) on an exposition, for the tests of
// to_prometheus() and of what libraries register. The caller skips, and says so, when
// promtool_available() is false.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace cogwheel::test_support {

inline bool promtool_available() { return std::system("command -v promtool >/dev/null 2>&1") == 0; }

struct promtool_verdict {
  bool passed = false;  // exit status 0
  std::string report;   // what promtool printed: its lint's findings, empty when clean
};

// Writes `text` to a temporary file and checks it with promtool.
inline promtool_verdict promtool_check(const std::string& text) {
  promtool_verdict v;
  char path[] = "/tmp/cogwheel_metrics_XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) {
    v.report = "mkstemp failed";
    return v;
  }
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!written) {
    ::unlink(path);
    v.report = "could not write the exposition";
    return v;
  }
  const std::string command = std::string("promtool check metrics < ") + path + " 2>&1";
  int status = -1;
  if (FILE* p = ::popen(command.c_str(), "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, p) != nullptr) v.report += buf;
    status = ::pclose(p);
  }
  ::unlink(path);
  v.passed = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return v;
}

}  // namespace cogwheel::test_support
