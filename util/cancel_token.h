// CancelToken: asks in-flight work to stop, from any thread (a client gone, a stop string matched, a
// deadline passed). Work either checks cancelled() between steps or attaches a callback that
// interrupts a blocking call (e.g. cancels an RPC); transport stays with whoever attaches.
//
// Thread-safe: mu_ guards the flag and the callbacks. Callbacks run under the token's lock, so they
// must be quick and must not call back into the token (an RPC's TryCancel is the intended kind).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>

#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace ds41 {

// Why work was cancelled, for requests_cancelled_total{reason}: the caller went away (or a stop
// string ended it), its deadline passed, or this process is shutting down.
enum class CancelReason { kClient, kDeadline, kShutdown };
inline constexpr CancelReason kCancelReasons[] = {CancelReason::kClient, CancelReason::kDeadline, CancelReason::kShutdown};
const char* CancelReasonName(CancelReason r);  // client | deadline | shutdown

// The reason for a cancel that arrives now on a call with `deadline`: shutdown once the process's
// shutdown cancels what is left (MarkShuttingDown), deadline when it has passed, else the client.
CancelReason CancelReasonNow(std::chrono::system_clock::time_point deadline);
// From `cancels_from` on (the end of the shutdown grace), cancels are the shutdown's.
void MarkShuttingDown(std::chrono::system_clock::time_point cancels_from);

class CancelToken {
 public:
  CancelToken() = default;
  CancelToken(const CancelToken&) = delete;
  CancelToken& operator=(const CancelToken&) = delete;

  // Runs every attached callback once; later Cancel calls do nothing (the first reason stays).
  void Cancel(CancelReason reason = CancelReason::kClient);
  bool cancelled() const;
  CancelReason reason() const;

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
  mutable Mutex mu_;
  bool cancelled_ DS41_GUARDED_BY(mu_) = false;
  CancelReason reason_ DS41_GUARDED_BY(mu_) = CancelReason::kClient;
  uint64_t next_id_ DS41_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, std::function<void()>> callbacks_ DS41_GUARDED_BY(mu_);
};

// A non-owning shared_ptr to `token` (null for null), for an asynchronous call whose caller waits
// for its end and so keeps the token alive past it (the synchronous wrappers of async calls).
inline std::shared_ptr<CancelToken> Borrowed(CancelToken* token) {
  return token ? std::shared_ptr<CancelToken>(std::shared_ptr<void>(), token) : nullptr;
}

}  // namespace ds41
