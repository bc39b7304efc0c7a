#include "sim/warm_directory.h"

namespace ds41::sim {

void WarmDirectory::Held(int64_t session, int decoder, int64_t length, double t) {
  records_[static_cast<size_t>(session)].push_back(Record{decoder, length, t, std::numeric_limits<double>::infinity()});
}

void WarmDirectory::Dropped(int64_t session, int decoder, double t) {
  for (Record& r : records_[static_cast<size_t>(session)]) {
    if (r.decoder == decoder && r.until == std::numeric_limits<double>::infinity()) r.until = t;
  }
}

}  // namespace ds41::sim
