// simple_head: a shortcut around http_parser for the request heads most clients send: a GET or
// HEAD of a plain path, HTTP/1.1, CRLF line ends, and only headers that neither http_parser nor
// the server acts on (Host, User-Agent, Accept, ...). http_parser walks a head a byte at a time
// with a callback per piece; this scans it in a few tight loops, several times cheaper.
//
// The contract that keeps behaviour identical: simple_head() accepts a head only if http_parser
// 2.9 (strict or not) parses it without error into a complete message with that method and
// target, keep-alive (HTTP/1.1, no Connection header), no body, no upgrade, and request_parser
// itself would fail none of its checks (token header names, the head limit). Anything else it
// declines (length 0) and the caller hands the bytes to http_parser, from the same byte, so a
// declined head is parsed exactly as before. Declined among others: other methods, a target
// with '?' or '#' or not starting with '/', HTTP/1.0, a bare LF, obsolete line folding, bytes
// outside printable ASCII and tab, a header whose name starts with Connection, Proxy-Connection,
// Content-Length, Transfer-Encoding, Upgrade or Expect, a head not wholly in `data`.
#pragma once

#include <http_parser.h>

#include <cstddef>
#include <string_view>

namespace http_example {

struct simple_request_head {
  std::size_t length = 0;  // bytes of the head, its final CRLF CRLF included; 0: declined
  http_method method = HTTP_GET;
  std::string_view target;  // a view into the data given
};

// Recognises a simple head at the start of data (see above), no longer than max_bytes.
simple_request_head simple_head(std::string_view data, std::size_t max_bytes) noexcept;

}  // namespace http_example
