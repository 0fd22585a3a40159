// The whole public API of cogwheel in one include. No liburing and nothing of the loop's
// internals reaches a translation unit through it (tests/install checks that).
#pragma once

#include <cogwheel/io/address.hpp>
#include <cogwheel/io/buffer_pool.hpp>
#include <cogwheel/io/connect_options.hpp>
#include <cogwheel/io/park.hpp>
#include <cogwheel/io/resolve.hpp>
#include <cogwheel/io/tcp.hpp>
#include <cogwheel/io/udp.hpp>
#include <cogwheel/runtime/channel.hpp>
#include <cogwheel/runtime/deadline.hpp>
#include <cogwheel/runtime/event.hpp>
#include <cogwheel/runtime/expiry_map.hpp>
#include <cogwheel/runtime/interval.hpp>
#include <cogwheel/runtime/operation.hpp>
#include <cogwheel/runtime/options.hpp>
#include <cogwheel/runtime/result.hpp>
#include <cogwheel/runtime/run.hpp>
#include <cogwheel/runtime/runtime.hpp>
#include <cogwheel/runtime/semaphore.hpp>
#include <cogwheel/runtime/sleep.hpp>
#include <cogwheel/runtime/spawn.hpp>
#include <cogwheel/runtime/stats.hpp>
#include <cogwheel/runtime/stop.hpp>
#include <cogwheel/runtime/task.hpp>
#include <cogwheel/runtime/time.hpp>
#include <cogwheel/runtime/timeout.hpp>
#include <cogwheel/runtime/when_all.hpp>
#include <cogwheel/runtime/when_any.hpp>
