#include "util/cancel_token.h"

namespace ds41 {

void CancelToken::Cancel() {
  std::lock_guard<std::mutex> l(mu_);
  if (cancelled_) return;
  cancelled_ = true;
  for (auto& [id, fn] : callbacks_) fn();
  callbacks_.clear();
}

bool CancelToken::cancelled() const {
  std::lock_guard<std::mutex> l(mu_);
  return cancelled_;
}

CancelToken::Attachment CancelToken::OnCancel(std::function<void()> fn, bool* attached) {
  std::lock_guard<std::mutex> l(mu_);
  if (attached) *attached = !cancelled_;
  if (cancelled_) {
    fn();
    return {};
  }
  const uint64_t id = next_id_++;
  callbacks_.emplace(id, std::move(fn));
  return {this, id};
}

CancelToken::Attachment::~Attachment() {
  if (!token_) return;
  std::lock_guard<std::mutex> l(token_->mu_);
  token_->callbacks_.erase(id_);
}

}  // namespace ds41
