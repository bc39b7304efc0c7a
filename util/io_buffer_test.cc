// AllocateIoBuffer: O_DIRECT alignment, the whole size usable, and both kinds freed by the deleter
// (the sanitizer builds check the frees).
#include "util/io_buffer.h"

#include <gtest/gtest.h>

#include <cstring>

namespace ds41 {
namespace {

TEST(IoBufferTest, AlignedAndWholeForSmallAndHugeSizes) {
  for (size_t bytes : {size_t{1}, size_t{4096}, size_t{60000}, (size_t{2} << 20) - 1, size_t{2} << 20,
                       (size_t{4} << 20) + 12345}) {
    IoBuffer b = AllocateIoBuffer(bytes);
    ASSERT_NE(b, nullptr);
    const auto at = reinterpret_cast<uintptr_t>(b.get());
    EXPECT_EQ(at % 4096, 0u) << bytes;
    if (bytes >= (size_t{2} << 20)) {
      EXPECT_EQ(at % (size_t{2} << 20), 0u) << bytes;  // huge-page aligned
    }
    std::memset(b.get(), 0xA5, bytes);
    EXPECT_EQ(b[bytes - 1], 0xA5);
  }
  IoBuffer moved = AllocateIoBuffer(size_t{3} << 20);
  IoBuffer other = std::move(moved);  // the deleter (the mapping's size) moves with it
  EXPECT_EQ(other.get_deleter().mapped, size_t{4} << 20);  // whole huge pages, unmapped as one
  other.reset();  // (the sanitizer builds check the unmapping)
}

}  // namespace
}  // namespace ds41
