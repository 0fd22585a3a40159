// The reference model of expiry_map and a driver that plays random operations on both, shared by
// expiry_map_test.cpp (a seeded generator) and tests/fuzz/expiry_map_fuzz.cpp (the fuzzer's
// bytes). The model is a std::map from key to value and deadline, rounded up to the tick as the
// timer queue rounds (a ttl <= 0 is due at once; no deadline: persistent). A key is live while it
// is present and persistent or not yet due. After each advance (a sleep of the paused clock) the
// batches the map delivered must hold exactly the model's keys due by then.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <cogwheel/runtime/expiry_map.hpp>
#include <cogwheel/runtime/result.hpp>
#include <cogwheel/runtime/sleep.hpp>
#include <cogwheel/runtime/spawn.hpp>
#include <cogwheel/runtime/task.hpp>
#include <cogwheel/runtime/time.hpp>

namespace cogwheel::test {

using model_map = expiry_map<std::uint64_t, std::uint64_t>;
using model_pairs = std::vector<std::pair<std::uint64_t, std::uint64_t>>;

// The deadline the queue gives now + ttl: rounded up to the tick (time_point::min(): due now).
inline clock::time_point rounded(clock::time_point now, clock::duration ttl, clock::duration tick) {
  if (ttl <= clock::duration::zero()) return clock::time_point::min();
  const auto ns = (now + ttl).time_since_epoch().count();
  const auto t = tick.count();
  return clock::time_point(clock::duration((ns + t - 1) / t * t));
}

// Awaits batches while *running, never suspending between two waits (so none is dropped).
inline task<> collect_batches(model_map& m, model_pairs& got, std::size_t& batches, const bool& running) {
  while (running) {
    result<model_map::batch> b = co_await m.expired();
    if (!b) break;
    if (b->empty()) got.emplace_back(~std::uint64_t{0}, ~std::uint64_t{0});  // an empty batch: a failure
    ++batches;
    got.insert(got.end(), b->begin(), b->end());
  }
}

// Plays `rounds` rounds of operations drawn by pick(n) (a number below n) on a map and the model;
// returns the first mismatch ("" when none). Runs on a paused clock.
template <class Pick>
task<std::string> play_against_model(Pick pick, int rounds, clock::duration tick) {
  struct entry {
    std::uint64_t value;
    std::optional<clock::time_point> deadline;
  };
  model_map m;
  std::map<std::uint64_t, entry> model;
  model_pairs got;
  std::size_t batches = 0;
  bool running = true;
  std::ostringstream fail;
  spawn(collect_batches(m, got, batches, running));
  co_await yield();  // the collector waits
  auto random_ttl = [&]() -> clock::duration {
    switch (pick(8)) {
      case 0: return clock::duration(-static_cast<clock::rep>(pick(1000)));  // past at once
      case 1: return std::chrono::hours(1);                                  // far, past the low levels
      case 2: return static_cast<clock::rep>(pick(5000)) * tick + clock::duration(pick(1000));
      default: return static_cast<clock::rep>(pick(40)) * tick + static_cast<clock::rep>(pick(3)) * tick / 3;
    }
  };
  std::uint64_t next_value = 1;
  for (int round = 0; round < rounds && fail.tellp() == 0; ++round) {
    const clock::time_point now = cogwheel::now();
    for (std::uint64_t op = 0, ops = pick(12); op < ops && fail.tellp() == 0; ++op) {
      const std::uint64_t k = pick(64);
      auto it = model.find(k);
      const bool live = it != model.end() && (!it->second.deadline || *it->second.deadline > now);
      switch (pick(6)) {
        case 0:
        case 1: {
          const clock::duration ttl = random_ttl();
          const std::uint64_t v = next_value++;
          if (m.insert_or_assign(k, v, ttl) != !live) fail << "insert_or_assign(" << k << ") said new=" << live;
          model[k] = entry{v, rounded(now, ttl, tick)};
          break;
        }
        case 2: {
          const clock::duration ttl = random_ttl();  // earlier or later than before
          if (m.expire_after(k, ttl) != live) fail << "expire_after(" << k << ") != " << live;
          if (live) it->second.deadline = rounded(now, ttl, tick);
          break;
        }
        case 3:
          if (m.persist(k) != live) fail << "persist(" << k << ") != " << live;
          if (live) it->second.deadline.reset();
          break;
        case 4:
          if (m.erase(k) != live) fail << "erase(" << k << ") != " << live;
          if (it != model.end()) model.erase(it);
          break;
        default: {
          const std::uint64_t* v = m.find(k);
          if (!live && v != nullptr) fail << "find(" << k << ") returned a key that is not live";
          if (live && (v == nullptr || *v != it->second.value)) fail << "find(" << k << ") missed or wrong";
          const std::optional<clock::time_point> e = m.expiry(k);
          const std::optional<clock::time_point> want =
              live && it->second.deadline ? it->second.deadline : std::optional<clock::time_point>();
          if (e != want) fail << "expiry(" << k << ") differs";
        }
      }
    }
    if (m.size() != model.size()) fail << "size " << m.size() << " != " << model.size();
    // Advance: a few ticks mostly, sometimes past a wheel level.
    const clock::duration d = pick(10) == 0 ? static_cast<clock::rep>(pick(6000)) * tick
                                            : static_cast<clock::rep>(pick(4)) * tick + clock::duration(pick(2));
    co_await sleep_for(d);
    co_await yield();  // the collector takes what this advance fired
    const clock::time_point at = cogwheel::now();
    model_pairs due;
    for (auto i = model.begin(); i != model.end();) {
      if (i->second.deadline && *i->second.deadline <= at) {
        due.emplace_back(i->first, i->second.value);
        i = model.erase(i);
      } else {
        ++i;
      }
    }
    std::sort(due.begin(), due.end());
    std::sort(got.begin(), got.end());
    if (got != due && fail.tellp() == 0)
      fail << "round " << round << ": " << got.size() << " expired, the model says " << due.size();
    got.clear();
    if (m.size() != model.size() && fail.tellp() == 0) fail << "size after advance " << m.size() << " != " << model.size();
  }
  running = false;
  m.insert_or_assign(~std::uint64_t{0}, 0, clock::duration(-1));  // wakes the collector to end it
  co_await sleep_for(tick);
  co_return fail.str();
}

}  // namespace cogwheel::test
