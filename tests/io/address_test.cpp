#include <cogwheel/io/address.hpp>  // first: the header compiles on its own

#include <arpa/inet.h>
#include <sys/un.h>

#include <cstring>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include <cogwheel/io/resolve.hpp>

namespace cogwheel {
namespace {

using namespace std::string_view_literals;

TEST(socket_address, parses_and_formats_ipv4) {
  auto a = socket_address::parse("127.0.0.1:80");
  ASSERT_TRUE(a) << a.error().message();
  EXPECT_TRUE(a->is_ipv4());
  EXPECT_EQ(a->family(), AF_INET);
  EXPECT_EQ(a->port(), 80);
  EXPECT_EQ(a->size(), sizeof(sockaddr_in));
  EXPECT_EQ(a->to_string(), "127.0.0.1:80");
  const auto* in = reinterpret_cast<const sockaddr_in*>(a->data());
  EXPECT_EQ(in->sin_addr.s_addr, htonl(INADDR_LOOPBACK));
  EXPECT_EQ(in->sin_port, htons(80));
}

TEST(socket_address, parses_and_formats_ipv6) {
  auto a = socket_address::parse("[::1]:8080");
  ASSERT_TRUE(a) << a.error().message();
  EXPECT_TRUE(a->is_ipv6());
  EXPECT_EQ(a->port(), 8080);
  EXPECT_EQ(a->size(), sizeof(sockaddr_in6));
  EXPECT_EQ(a->to_string(), "[::1]:8080");
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a->data());
  EXPECT_EQ(std::memcmp(&in6->sin6_addr, &in6addr_loopback, sizeof in6addr_loopback), 0);
  EXPECT_EQ(in6->sin6_scope_id, 0u);
}

TEST(socket_address, parses_ipv6_with_numeric_zone) {
  auto a = socket_address::parse("[fe80::1%1]:80");
  ASSERT_TRUE(a) << a.error().message();
  EXPECT_TRUE(a->is_ipv6());
  EXPECT_EQ(reinterpret_cast<const sockaddr_in6*>(a->data())->sin6_scope_id, 1u);
  EXPECT_EQ(a->to_string(), "[fe80::1%1]:80");
}

TEST(socket_address, parses_ipv6_zone_given_as_interface_name) {
  auto a = socket_address::parse("[fe80::1%lo]:80");  // loopback exists everywhere we run
  ASSERT_TRUE(a) << a.error().message();
  EXPECT_NE(reinterpret_cast<const sockaddr_in6*>(a->data())->sin6_scope_id, 0u);
}

TEST(socket_address, accepts_port_bounds) {
  auto low = socket_address::parse("1.2.3.4:0");
  ASSERT_TRUE(low);
  EXPECT_EQ(low->port(), 0);
  auto high = socket_address::parse("[::]:65535");
  ASSERT_TRUE(high);
  EXPECT_EQ(high->port(), 65535);
}

class rejects_garbage : public ::testing::TestWithParam<std::string_view> {};

TEST_P(rejects_garbage, as_invalid_argument) {
  auto a = socket_address::parse(GetParam());
  ASSERT_FALSE(a) << "parsed as " << a->to_string();
  EXPECT_EQ(a.error(), errc::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(socket_address, rejects_garbage,
                         ::testing::Values(""sv, "1.2.3.4"sv, "1.2.3.4:"sv, ":80"sv, "1.2.3.4:65536"sv,
                                           "::1:80"sv, "[::1]80"sv, "host:80"sv, "[::1]"sv, "[::1]:"sv,
                                           "[::1"sv, "::1]:80"sv, "[]:80"sv, "1.2.3.4:80x"sv,
                                           "1.2.3.4:-1"sv, "1.2.3.4:+80"sv, "1.2.3.4: 80"sv,
                                           " 1.2.3.4:80"sv, "1.2.3:80"sv, "1.2.3.4.5:80"sv,
                                           "256.1.1.1:80"sv, "1.2.3.4:99999999999999999999"sv,
                                           "[fe80::1%]:80"sv, "[fe80::1%no-such-if0]:80"sv,
                                           "[::1]:80:80"sv, "1.2.3.4:80:80"sv, "[[::1]]:80"sv,
                                           "[1.2.3.4]:80"sv,  // brackets are for IPv6 literals
                                           "127.0.0.1\0junk:80"sv));

TEST(socket_address, to_string_round_trips) {
  for (std::string_view text : {"127.0.0.1:80"sv, "0.0.0.0:0"sv, "255.255.255.255:65535"sv, "[::1]:8080"sv,
                                "[::]:1"sv, "[fe80::1%1]:80"sv, "[2001:db8::abcd:1]:443"sv,
                                "[::ffff:10.0.0.1]:53"sv}) {
    auto a = socket_address::parse(text);
    ASSERT_TRUE(a) << text;
    EXPECT_EQ(a->to_string(), text);
    auto again = socket_address::parse(a->to_string());
    ASSERT_TRUE(again) << text;
    EXPECT_EQ(*again, *a) << text;
  }
}

TEST(socket_address, formats_in_canonical_form) {
  auto a = socket_address::parse("[2001:0db8:0000:0000:0000:0000:0000:0001]:80");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->to_string(), "[2001:db8::1]:80");
}

TEST(socket_address, equality_compares_family_address_and_port) {
  auto a = socket_address::parse("127.0.0.1:80");
  auto b = socket_address::parse("127.0.0.1:80");
  auto other_port = socket_address::parse("127.0.0.1:81");
  auto other_host = socket_address::parse("127.0.0.2:80");
  auto v6 = socket_address::parse("[::ffff:127.0.0.1]:80");
  ASSERT_TRUE(a && b && other_port && other_host && v6);
  EXPECT_EQ(*a, *b);
  EXPECT_FALSE(*a == *other_port);
  EXPECT_FALSE(*a == *other_host);
  EXPECT_FALSE(*a == *v6);
  EXPECT_EQ(*a, socket_address::ipv4_loopback(80));
  EXPECT_EQ(*socket_address::parse("[::1]:80"), socket_address::ipv6_loopback(80));
  EXPECT_EQ(*socket_address::parse("0.0.0.0:7"), socket_address::ipv4_any(7));
}

TEST(socket_address, default_is_ipv4_any_port_zero) {
  socket_address a;
  EXPECT_TRUE(a.is_ipv4());
  EXPECT_EQ(a.to_string(), "0.0.0.0:0");
  EXPECT_EQ(a, socket_address::ipv4_any(0));
}

TEST(socket_address, set_port_changes_only_the_port) {
  auto a = socket_address::ipv6_loopback(1);
  a.set_port(4242);
  EXPECT_EQ(a.port(), 4242);
  EXPECT_EQ(a.to_string(), "[::1]:4242");
  auto b = socket_address::ipv4_loopback(1);
  b.set_port(65535);
  EXPECT_EQ(b.to_string(), "127.0.0.1:65535");
}

TEST(socket_address, from_ip_takes_a_bare_host) {
  auto a = socket_address::from_ip("10.1.2.3", 99);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->to_string(), "10.1.2.3:99");
  auto b = socket_address::from_ip("::1", 99);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->to_string(), "[::1]:99");
  EXPECT_EQ(socket_address::from_ip("", 1).error(), errc::invalid_argument);
  EXPECT_EQ(socket_address::from_ip("[::1]", 1).error(), errc::invalid_argument);
  EXPECT_EQ(socket_address::from_ip("localhost", 1).error(), errc::invalid_argument);
  EXPECT_EQ(socket_address::from_ip(std::string(200, '1'), 1).error(), errc::invalid_argument);
}

TEST(socket_address, from_sockaddr_reads_ipv4_and_ipv6) {
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_port = htons(1234);
  in.sin_addr.s_addr = htonl(0x7f000001);
  auto a = socket_address::from_sockaddr(reinterpret_cast<const sockaddr*>(&in), sizeof in);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->to_string(), "127.0.0.1:1234");
  EXPECT_EQ(*a, socket_address::ipv4_loopback(1234));

  sockaddr_in6 in6{};
  in6.sin6_family = AF_INET6;
  in6.sin6_port = htons(4321);
  in6.sin6_addr = in6addr_loopback;
  auto b = socket_address::from_sockaddr(reinterpret_cast<const sockaddr*>(&in6), sizeof in6);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->to_string(), "[::1]:4321");
  EXPECT_EQ(*b, socket_address::ipv6_loopback(4321));

  // Copying out through data()/size() and back gives the same address.
  auto c = socket_address::from_sockaddr(b->data(), b->size());
  ASSERT_TRUE(c);
  EXPECT_EQ(*c, *b);
}

TEST(socket_address, from_sockaddr_rejects_other_families_and_short_lengths) {
  sockaddr_un un{};
  un.sun_family = AF_UNIX;
  EXPECT_EQ(socket_address::from_sockaddr(reinterpret_cast<const sockaddr*>(&un), sizeof un).error(),
            errc::address_family_not_supported);

  sockaddr_in in{};
  in.sin_family = AF_INET;
  EXPECT_FALSE(socket_address::from_sockaddr(reinterpret_cast<const sockaddr*>(&in), sizeof in - 1));
  sockaddr_in6 in6{};
  in6.sin6_family = AF_INET6;
  EXPECT_FALSE(socket_address::from_sockaddr(reinterpret_cast<const sockaddr*>(&in6), sizeof(sockaddr_in)));
  EXPECT_EQ(socket_address::from_sockaddr(nullptr, 0).error(), errc::invalid_argument);
}

// The one check of a host name at every boundary that takes one (resolve, connect by name,
// TLS server names): whole DNS names and IP literals pass, anything a C string would cut or a
// name server would not look up does not.
TEST(host_name, ip_literals_and_dns_names_pass_and_nul_spaces_and_empty_labels_do_not) {
  for (std::string_view ok : {"localhost"sv, "localhost."sv, "a"sv, "redis-1.internal"sv, "_srv._tcp.example"sv,
                              "127.0.0.1"sv, "::1"sv, "[::1]"sv, "fe80::1%1"sv, "xn--bcher-kva.example"sv})
    EXPECT_TRUE(is_valid_host_name(ok)) << ok;
  const std::string label63(63, 'a');
  EXPECT_TRUE(is_valid_host_name(label63 + ".test"));
  EXPECT_FALSE(is_valid_host_name(label63 + "a.test"));
  std::string long_name;
  while (long_name.size() < 260) long_name += "abcdefghi.";
  EXPECT_TRUE(is_valid_host_name(long_name.substr(0, 253)));
  EXPECT_FALSE(is_valid_host_name(long_name.substr(0, 250) + "abcd"));
  for (std::string_view bad : {""sv, "."sv, "localhost\0.evil.example"sv, "localhost\0"sv, "\0"sv, "local host"sv,
                               "a..b"sv, ".a"sv, "a/b"sv, "a@b"sv, "[::1"sv, "::1::2"sv, "[127.0.0.1\0]"sv, "a\nb"sv,
                               "\xc3\xa9.example"sv})
    EXPECT_FALSE(is_valid_host_name(bad)) << bad;
}

}  // namespace
}  // namespace cogwheel

// Every socket object holds its local address: the type is sized for IPv4 and IPv6 only, not
// sockaddr_storage's 128 bytes.
static_assert(sizeof(cogwheel::socket_address) == sizeof(sockaddr_in6));
