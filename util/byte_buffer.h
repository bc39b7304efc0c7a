// A growable byte buffer whose new bytes are left unset, for bytes about to be overwritten (a
// socket read): std::string's resize would zero them first, a pass over every payload for nothing.
// Moved from, it is empty.
#pragma once

#include <algorithm>
#include <cstring>
#include <memory>
#include <string_view>
#include <utility>

namespace ds41 {

class ByteBuffer {
 public:
  ByteBuffer() = default;
  ByteBuffer(ByteBuffer&& o) noexcept
      : buf_(std::move(o.buf_)), size_(std::exchange(o.size_, 0)), cap_(std::exchange(o.cap_, 0)) {}
  ByteBuffer& operator=(ByteBuffer&& o) noexcept {
    buf_ = std::move(o.buf_);
    size_ = std::exchange(o.size_, 0);
    cap_ = std::exchange(o.cap_, 0);
    return *this;
  }

  // Keeps the first min(n, size()) bytes; bytes past them are unset.
  void Resize(size_t n) {
    if (n > cap_) {
      const size_t cap = std::max(n, cap_ * 2);
      auto grown = std::make_unique_for_overwrite<char[]>(cap);
      if (size_ > 0) std::memcpy(grown.get(), buf_.get(), size_);
      buf_ = std::move(grown);
      cap_ = cap;
    }
    size_ = n;
  }
  void Clear() { size_ = 0; }

  char* data() { return buf_.get(); }
  const char* data() const { return buf_.get(); }
  size_t size() const { return size_; }
  std::string_view view() const { return {buf_.get(), size_}; }

 private:
  std::unique_ptr<char[]> buf_;
  size_t size_ = 0, cap_ = 0;
};

}  // namespace ds41
