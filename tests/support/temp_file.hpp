// A file of the test's own under /tmp with the given text (a hosts file), removed at the end.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace cogwheel::test_support {

class temp_file {
 public:
  explicit temp_file(const std::string& text) {
    char path[] = "/tmp/cogwheel_test_XXXXXX";
    ::close(::mkstemp(path));
    path_ = path;
    std::ofstream(path_) << text;
  }
  temp_file(const temp_file&) = delete;
  temp_file& operator=(const temp_file&) = delete;
  ~temp_file() { std::remove(path_.c_str()); }
  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
};

}  // namespace cogwheel::test_support
