// loop_services: the named door through which libraries built on the runtime (io's listener
// and buffer pools) use a core's loop for what is not one operation: state that outlives
// coroutine frames and must let go of the loop when it shuts down, a request with several
// submissions in flight, and the backend's provided-buffer groups. Together with
// loop_access.hpp (timers, the ready queue, submitting and cancelling) it is everything a
// library may ask of the loop; event_loop itself stays private to runtime/src.
//
// Threading: each function acts on `loop`, which must be the calling thread's.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cogwheel/runtime/detail/intrusive_list.hpp>
#include <cogwheel/runtime/detail/loop_access.hpp>
#include <cogwheel/runtime/resolver_options.hpp>

namespace cogwheel::detail {

// Something that outlives coroutine frames but holds loop resources (a listener's armed accept
// requests and back-off timer, a buffer pool's group): the loop calls on_shutdown once, after
// destroying its coroutines and before its backend goes, and the owner lets go of the loop
// there. Unlinks itself when destroyed.
struct shutdown_hook : list_link {
  void (*on_shutdown)(shutdown_hook&) noexcept = nullptr;
};
// Precondition: !h.linked().
void add_shutdown_hook(event_loop& loop, shutdown_hook& h) noexcept;

// For an owner with several submissions in flight under one io_completion (a listener's
// accepts): cancels them all and returns once `in_flight` (which its completions decrement)
// is 0.
void cancel_all_and_wait(event_loop& loop, io_completion& op, const unsigned& in_flight);

// Provided buffers (see io_driver): `count` buffers of `size` bytes at `memory`, buffer i at
// memory + i * stride (stride >= size), all given to the backend as group `group`. Returns 0
// or -errno (-EEXIST: the id is taken; -EOPNOTSUPP: not on this kernel).
int add_buffer_group(event_loop& loop, std::uint16_t group, std::byte* memory, std::uint32_t count,
                     std::uint32_t size, std::uint32_t stride) noexcept;
// Gives buffer `id` back to `group` after a completion handed it out.
void give_buffer(event_loop& loop, std::uint16_t group, std::uint16_t id) noexcept;
void remove_buffer_group(event_loop& loop, std::uint16_t group) noexcept;

// --- a socket's home core: the loop that watches it and counts it as open ---
// (core_metrics::open_sockets; epoll's registration, see io_request::socket.)
// A socket of the io library is opened on, or arrives at (its first operation there), `loop`,
// on its thread: counted there from now on. Returns loop's core index, for socket_departs.
unsigned socket_arrives(event_loop& loop) noexcept;
// The socket `fd`, counted on `home` (core `home_core`), leaves it: it arrived at another loop
// (`unwatch`: home's backend stops watching it, epoll: EPOLL_CTL_DEL), was handed out (release,
// `unwatch` too) or closes (closing the descriptor leaves every epoll set: no `unwatch`). On
// home's thread the gauge goes down; on another loop thread of home's runtime home counts the
// departure (an atomic add: a socket moving between cores is not the hot path); on any other
// thread home is not followed (it may be gone), and the socket stays counted there.
void socket_departs(event_loop* home, unsigned home_core, int fd, bool unwatch) noexcept;

// Buffers lent out of the core's buffer pools (core_metrics::pooled_buffers_in_use): +n when
// a read takes them, -n when they are given back. On `loop`'s thread.
void count_pooled_buffers(event_loop& loop, int delta) noexcept;

// A listener stopped accepting for a while (out of descriptors): counted in the core's metrics.
void note_accept_pause(event_loop& loop) noexcept;

// The name resolver's settings the runtime was started with (runtime_options::resolver).
const resolver_options& resolver_settings(event_loop& loop) noexcept;

}  // namespace cogwheel::detail
