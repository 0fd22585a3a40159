/// @file
/// park(stream, until, wake): a connection that waits for its next bytes with no coroutine frame,
/// as nginx keeps an idle connection (a small record: the socket, an armed read and a timer).
///
///   tcp_stream s = ...;                       // between two requests
///   park(std::move(s), now() + 75s, [&cfg](tcp_stream s, result<pooled_buffer> got) {
///     spawn(serve(std::move(s), std::move(got), cfg));
///   });
///   co_return;                                // the frame goes; the record (~376 B) stays
///
/// The parked stream waits in a read from the core's shared buffer pool (read_pooled(): no
/// buffer is held while it waits) raced against a timer at `until`. `wake(stream, outcome)` is
/// called exactly once, on this core's loop thread, from the loop (never from inside park(),
/// unless the read cannot start at all: no buffer pool on this core), with the stream back and:
///   - the bytes that arrived, in a pooled_buffer (an empty one: the peer closed its side);
///   - errc::timed_out once `until` has passed (the read was cancelled and has completed; bytes
///     that raced the timer are returned as bytes, never lost);
///   - errc::no_buffer_space when data came and every buffer of the pool was held;
///   - another error of the read (ECONNRESET...).
/// wake should hand the stream on quickly (spawn a task): it runs in the loop's completion or
/// expiry handling.
///
/// Shutdown: streams still parked when the core's loop shuts down are closed (their reads
/// cancelled and waited for), and wake is not called: the coroutines it would start are gone.
///
/// `wake` must be trivially copyable and destructible, at most 24 bytes (a lambda capturing a
/// few references or a time point); it is kept inside the record. Threading: the stream must
/// have no operation in flight, and park() runs on a cogwheel loop thread, whose core the
/// stream then belongs to. Allocation: one record per park, from the thread's frame pool.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>

#include <cogwheel/io/buffer_pool.hpp>
#include <cogwheel/io/tcp.hpp>
#include <cogwheel/runtime/result.hpp>
#include <cogwheel/runtime/time.hpp>

namespace cogwheel {

namespace detail {

inline constexpr std::size_t park_capture_bytes = 24;

// The type-erased wake: calls the callable stored at `capture` (see park()).
using park_wake_fn = void (*)(const std::byte* capture, tcp_stream s, cogwheel::result<pooled_buffer> got);

// park() without the template: `capture` holds park_capture_bytes bytes of the callable.
void park_stream(tcp_stream s, clock::time_point until, park_wake_fn wake, const std::byte* capture);

}  // namespace detail

/// Parks `s` until bytes arrive, the peer closes, `until` passes or the read fails, then calls
/// wake(std::move(s), outcome) once (see the file comment). Throws std::bad_alloc when the record
/// cannot be allocated (s is closed then).
template <class F>
  requires std::is_trivially_copyable_v<F> && std::is_trivially_destructible_v<F> &&
           (sizeof(F) <= detail::park_capture_bytes) && (alignof(F) <= alignof(void*)) &&
           std::is_invocable_v<const F&, tcp_stream, cogwheel::result<pooled_buffer>>
void park(tcp_stream s, clock::time_point until, F wake) {
  alignas(void*) std::byte capture[detail::park_capture_bytes]{};
  ::new (static_cast<void*>(capture)) F(wake);
  detail::park_stream(
      std::move(s), until,
      [](const std::byte* c, tcp_stream stream, cogwheel::result<pooled_buffer> got) {
        (*std::launder(reinterpret_cast<const F*>(c)))(std::move(stream), std::move(got));
      },
      capture);
}

}  // namespace cogwheel
