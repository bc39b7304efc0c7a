#include "cache_service/data_metrics.h"

namespace ds41 {

DataPathMetrics::DataPathMetrics(prometheus::Registry& r)
    : connections_open(prometheus::BuildGauge().Name("ds41_cache_data_connections").Help("Open data-path connections").Register(r).Add({})),
      held_bytes(prometheus::BuildGauge().Name("ds41_cache_data_held_bytes").Help("Read chunks and answers the data path holds in memory").Register(r).Add({})),
      chunk_pool_bytes(prometheus::BuildGauge().Name("ds41_cache_data_chunk_pool_bytes").Help("Full-size read chunks the data path has mapped, in use or idle (idle ones are unmapped after a while)").Register(r).Add({})),
      connections_accepted(prometheus::BuildCounter().Name("ds41_cache_data_connections_total").Help("Data-path connections accepted").Register(r).Add({})),
      connections_refused(prometheus::BuildCounter().Name("ds41_cache_data_connections_refused_total").Help("Data-path connections refused (over the limit)").Register(r).Add({})),
      bytes(prometheus::BuildCounter().Name("ds41_cache_data_bytes_total").Help("Data-path bytes, by direction").Register(r)),
      bytes_in(bytes.Add({{"direction", "in"}})),
      bytes_out(bytes.Add({{"direction", "out"}})),
      frames(prometheus::BuildCounter().Name("ds41_cache_data_frames_total").Help("Data-path request frames, by opcode and result").Register(r)),
      put_ok(frames.Add({{"opcode", "put"}, {"result", "ok"}})),
      put_rejected(frames.Add({{"opcode", "put"}, {"result", "rejected"}})),
      put_failed(frames.Add({{"opcode", "put"}, {"result", "failed"}})),
      get_ok(frames.Add({{"opcode", "get"}, {"result", "ok"}})),
      get_rejected(frames.Add({{"opcode", "get"}, {"result", "rejected"}})),
      protocol_errors(prometheus::BuildCounter().Name("ds41_cache_data_protocol_errors_total").Help("Data-path connections closed for a protocol error, by reason").Register(r)),
      error_framing(protocol_errors.Add({{"reason", "framing"}})),
      error_timeout(protocol_errors.Add({{"reason", "timeout"}})),
      error_tls(protocol_errors.Add({{"reason", "tls"}})),
      error_io(protocol_errors.Add({{"reason", "io"}})) {}

}  // namespace ds41
