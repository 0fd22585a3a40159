#include <cogwheel/redis/script.hpp>

#include <vector>

namespace cogwheel::redis {

task<result<reply>> script::run(client& c, std::span<const command_arg> keys, std::span<const command_arg> args) {
  if (sha1_.empty() && !loading_) {
    loading_ = true;
    auto loaded = co_await c.command("SCRIPT", "LOAD", source_);
    loading_ = false;
    if (!loaded) co_return loaded.error();
    if (!loaded->is_string()) co_return make_error_code(error::unexpected_type);
    sha1_ = std::string(loaded->str());
  }
  std::vector<command_arg> argv;
  argv.reserve(3 + keys.size() + args.size());
  argv.insert(argv.end(), {command_arg("EVALSHA"), command_arg(sha1_), command_arg(keys.size())});
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  if (!sha1_.empty()) {  // else another run is loading it: EVAL meanwhile
    auto r = co_await c.command(std::span<const command_arg>(argv));
    if (r || r.error() != error::no_script) co_return r;
  }
  argv[0] = command_arg("EVAL");
  argv[1] = command_arg(source_);
  co_return co_await c.command(std::span<const command_arg>(argv));
}

}  // namespace cogwheel::redis
