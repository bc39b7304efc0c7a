// Asio with TLS for the cache's data path: the same certificates, CA and mutual authentication as
// the process's gRPC transport security (rpc/transport_security.h), as asio::ssl contexts.
//
// A context is shared by every connection, on any thread: it is fully set up here and never changed
// after (each stream's own settings, such as VerifyServerName's, go on the stream).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <system_error>

#include "util/asio_include.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <asio/ssl.hpp>
#pragma GCC diagnostic pop

#include "rpc/transport_security.h"
#include "util/status.h"

namespace ds41 {

// Server side: presents the certificate; requires and verifies a client certificate chaining to
// the CA when client_auth. REQUIRES: security.tls().
StatusOr<std::shared_ptr<asio::ssl::context>> MakeServerTlsContext(const TransportSecurity& security);
// Client side: presents the certificate and verifies the server's against the CA. The peer's name
// is checked per connection (VerifyServerName).
StatusOr<std::shared_ptr<asio::ssl::context>> MakeClientTlsContext(const TransportSecurity& security);
// The name a server's certificate must carry: the configured server name, else the dialled host.
template <typename Stream>
void VerifyServerName(asio::ssl::stream<Stream>& s, const TransportSecurity& security, const std::string& host) {
  s.set_verify_callback(asio::ssl::host_name_verification(security.server_name().empty() ? host : security.server_name()));
}

// A TCP connection's bytes go through `tls` when it is set, else straight through `socket`: `f` is
// given whichever stream that is (client channels and server sessions alike).
template <typename F>
void WithStream(std::optional<asio::ssl::stream<asio::ip::tcp::socket&>>& tls, asio::ip::tcp::socket& socket, F&& f) {
  if (tls) {
    f(*tls);
  } else {
    f(socket);
  }
}

// Completion conditions of the data path's reads and writes (asio::async_read and async_write):
// asio's own (transfer_all, transfer_at_least) hand the socket at most 64 KiB per system call, so
// each 57 KB unit cost a call (and a pass through the event loop) of its own; these hand it all the
// buffers at once (up to asio's 64 per call) and the kernel takes what fits.
inline constexpr size_t kWholeTransfer = size_t{1} << 30;
// Done once the buffers are full.
inline size_t WholeTransfer(const std::error_code& ec, size_t) { return ec ? 0 : kWholeTransfer; }
// Done once `n` bytes are in; the buffers past them take what else had arrived.
inline auto TransferAtLeast(size_t n) {
  return [n](const std::error_code& ec, size_t got) -> size_t { return ec || got >= n ? 0 : kWholeTransfer; };
}

}  // namespace ds41
