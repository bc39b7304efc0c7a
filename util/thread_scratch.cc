#include "util/thread_scratch.h"

namespace ds41 {
namespace {
thread_local ScratchLink* scratch_head = nullptr;  // this thread's scratch buffers
}  // namespace

ScratchLink::ScratchLink(Bytes bytes, Release release) : bytes_(bytes), release_(release), next_(scratch_head) {
  scratch_head = this;
}

ScratchLink::~ScratchLink() {
  // Thread exit destroys them in reverse order of construction, so this is usually the head.
  for (ScratchLink** p = &scratch_head; *p != nullptr; p = &(*p)->next_) {
    if (*p == this) {
      *p = next_;
      return;
    }
  }
}

void ReleaseThreadScratch() {
  for (ScratchLink* s = scratch_head; s != nullptr; s = s->next_) s->release_(s);
}

size_t ThreadScratchBytes() {
  size_t n = 0;
  for (const ScratchLink* s = scratch_head; s != nullptr; s = s->next_) n += s->bytes_(s);
  return n;
}

}  // namespace ds41
