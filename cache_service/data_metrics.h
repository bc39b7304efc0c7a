// DataPathMetrics: what the bulk data path reports (ds41_cache_data_*), beside the store's
// ds41_store_* (store/store_metrics.h). Thread-safe (atomics).
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

namespace ds41 {

struct DataPathMetrics {
  explicit DataPathMetrics(prometheus::Registry& registry);

  prometheus::Gauge& connections_open;
  // Read chunks and answers the sessions hold (DataShared's budget counts this gauge).
  prometheus::Gauge& held_bytes;
  // Full-size read chunks mapped by the data path's pool, in use or idle (DataShared::chunks).
  prometheus::Gauge& chunk_pool_bytes;
  prometheus::Counter& connections_accepted;
  prometheus::Counter& connections_refused;  // over max_connections
  prometheus::Family<prometheus::Counter>& bytes;  // direction: in | out
  prometheus::Counter& bytes_in;
  prometheus::Counter& bytes_out;
  prometheus::Family<prometheus::Counter>& frames;  // opcode: put | get; result: ok | rejected | failed
  prometheus::Counter& put_ok;
  prometheus::Counter& put_rejected;  // failed validation (INVALID_ARGUMENT), as a gRPC Put would
  prometheus::Counter& put_failed;    // the store refused it
  prometheus::Counter& get_ok;
  prometheus::Counter& get_rejected;
  prometheus::Family<prometheus::Counter>& protocol_errors;  // reason: framing | timeout | tls | io
  prometheus::Counter& error_framing;
  prometheus::Counter& error_timeout;
  prometheus::Counter& error_tls;
  prometheus::Counter& error_io;
};

}  // namespace ds41
