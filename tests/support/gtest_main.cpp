// The main of every test executable: runs GoogleTest and turns "some test skipped itself
// (GTEST_SKIP: a kernel feature, a server binary or a peer missing), none failed" into exit
// code 77, which CTest (SKIP_RETURN_CODE) and Meson report as skipped, never as passed.
// GoogleTest's own main exits 0 in that case.
#include <gtest/gtest.h>

#include <cstdio>

namespace {

class skip_counter : public testing::EmptyTestEventListener {
 public:
  void OnTestEnd(const testing::TestInfo& info) override {
    if (info.result() != nullptr && info.result()->Skipped()) ++skipped;
  }
  int skipped = 0;
};

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  auto* counter = new skip_counter;  // owned by GoogleTest's listener list
  testing::UnitTest::GetInstance()->listeners().Append(counter);
  const int rc = RUN_ALL_TESTS();
  if (rc != 0) return rc;
  if (counter->skipped > 0) {
    std::printf("cogwheel: %d test(s) skipped: exit code 77 (reported as skipped)\n", counter->skipped);
    return 77;
  }
  return 0;
}
