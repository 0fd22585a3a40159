/// @file
/// script: a Lua script run by EVALSHA, falling back to EVAL when the server answers NOSCRIPT
/// (its script cache was flushed, or it restarted). The SHA1 is asked of the server once
/// (SCRIPT LOAD) on first use, and runs started while it loads use EVAL; EVAL also puts the
/// script back into the server's cache.
///
/// Threading: a script object belongs to one core (it caches the SHA1 without a lock).
#pragma once

#include <span>
#include <string>

#include <cogwheel/redis/client.hpp>
#include <cogwheel/redis/command.hpp>
#include <cogwheel/redis/reply.hpp>
#include <cogwheel/runtime/result.hpp>
#include <cogwheel/runtime/task.hpp>

namespace cogwheel::redis {

/// A Lua script and its SHA1 once the server gave it (see the file comment).
class script {
 public:
  /// A script with the Lua `source`; nothing is sent until run().
  explicit script(std::string source) : source_(std::move(source)) {}

  /// EVALSHA sha numkeys keys... args... The spans must outlive the task.
  task<result<reply>> run(client& c, std::span<const command_arg> keys, std::span<const command_arg> args);

  /// The Lua source given at construction.
  const std::string& source() const noexcept { return source_; }
  /// The script's SHA1 (40 hex digits) as the server gave it; empty until loaded.
  const std::string& sha1() const noexcept { return sha1_; }

 private:
  std::string source_;
  std::string sha1_;
  bool loading_ = false;  // one SCRIPT LOAD at a time; runs started meanwhile use EVAL
};

}  // namespace cogwheel::redis
