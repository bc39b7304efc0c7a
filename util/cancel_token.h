// CancelToken: asks in-flight work to stop, from any thread (a client gone, a stop string matched, a
// deadline passed). Work either checks cancelled() between steps or attaches a callback that
// interrupts a blocking call (e.g. cancels an RPC); transport stays with whoever attaches.
//
// Thread-safe: mu_ guards the flag and the callbacks. Callbacks run under the token's lock, so they
// must be quick and must not call back into the token (an RPC's TryCancel is the intended kind).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>

#include "util/thread_annotations.h"

namespace ds41 {

class CancelToken {
 public:
  CancelToken() = default;
  CancelToken(const CancelToken&) = delete;
  CancelToken& operator=(const CancelToken&) = delete;

  // Runs every attached callback once; later Cancel calls do nothing.
  void Cancel();
  bool cancelled() const;

  // Detaches its callback when destroyed (after which the callback never runs).
  class Attachment {
   public:
    Attachment() = default;
    Attachment(Attachment&& o) noexcept : token_(o.token_), id_(o.id_) { o.token_ = nullptr; }
    Attachment& operator=(Attachment&&) = delete;
    ~Attachment();

   private:
    friend class CancelToken;
    Attachment(CancelToken* token, uint64_t id) : token_(token), id_(id) {}
    CancelToken* token_ = nullptr;
    uint64_t id_ = 0;
  };

  // Runs `fn` at Cancel, or at once when already cancelled (then false is returned in *attached).
  [[nodiscard]] Attachment OnCancel(std::function<void()> fn, bool* attached = nullptr);

 private:
  mutable std::mutex mu_;
  bool cancelled_ DS41_GUARDED_BY(mu_) = false;
  uint64_t next_id_ DS41_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, std::function<void()>> callbacks_ DS41_GUARDED_BY(mu_);
};

}  // namespace ds41
