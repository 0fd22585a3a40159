// Whether task frames come from the frame pools here: not in AddressSanitizer builds (which must
// see every frame's allocation) nor with COGWHEEL_FRAME_POOL=0, where frames come from
// ::operator new and reuse is the allocator's business.
#pragma once

#include <cstdlib>
#include <cstring>

namespace cogwheel::detail {

inline bool pools_on() {
#if defined(__SANITIZE_ADDRESS__)
  return false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return false;
#endif
#endif
  const char* v = std::getenv("COGWHEEL_FRAME_POOL");
  return v == nullptr || std::strcmp(v, "0") != 0;
}

}  // namespace cogwheel::detail
