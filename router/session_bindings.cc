#include "router/session_bindings.h"

namespace ds41 {

std::string SessionBindings::SwaHolder(const std::string& session, int64_t position) const {
  if (session.empty() || position <= 0) return "";
  MutexLock l(&mu_);
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return "";
  if (it->second.decoder_end == position) return it->second.decoder;
  if (it->second.encoder_end == position) return it->second.encoder;
  return "";
}

size_t SessionBindings::Bind(const std::string& session, const std::string& decoder, int64_t decoder_end,
                             const std::string& encoder, int64_t encoder_end) {
  MutexLock l(&mu_);
  if (session.empty()) return sessions_.size();
  auto [it, inserted] = sessions_.try_emplace(session);
  if (!inserted) lru_.erase(it->second.lru);
  lru_.push_front(session);
  Binding& b = it->second;
  b.lru = lru_.begin();
  b.decoder = decoder;
  b.decoder_end = decoder_end;
  if (!encoder.empty()) {
    b.encoder = encoder;
    b.encoder_end = encoder_end;
  }
  while (sessions_.size() > max_sessions_) {
    sessions_.erase(lru_.back());
    lru_.pop_back();
  }
  return sessions_.size();
}

}  // namespace ds41
