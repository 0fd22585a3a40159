// The umbrella header brings neither liburing nor the loop's internals into a user's
// translation unit: a public header that starts including them again fails this test's build.
#include <cogwheel/cogwheel.hpp>

#include <gtest/gtest.h>

#include <type_traits>

#ifdef LIB_URING_H
#error "a public cogwheel header includes <liburing.h>"
#endif
#ifdef LINUX_IO_URING_H
#error "a public cogwheel header includes <linux/io_uring.h>"
#endif

template <class T, class = void>
struct is_complete : std::false_type {};
template <class T>
struct is_complete<T, std::void_t<decltype(sizeof(T))>> : std::true_type {};

// The loop stays an incomplete type for users: they reach it only through loop_access.hpp.
TEST(header_selfcontained, the_umbrella_pulls_in_neither_liburing_nor_the_loop) {
  EXPECT_FALSE(is_complete<cogwheel::detail::event_loop>::value);
}
