#include "cache_data/asio_tls.h"

namespace ds41 {
namespace {

StatusOr<std::shared_ptr<asio::ssl::context>> Make(const TransportSecurity& sec, bool server) {
  auto ctx = std::make_shared<asio::ssl::context>(server ? asio::ssl::context::tls_server : asio::ssl::context::tls_client);
  std::error_code ec;
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 | asio::ssl::context::no_sslv3 |
                       asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1,
                   ec);
  if (!ec) ctx->use_certificate_chain(asio::buffer(sec.cert_pem()), ec);
  if (!ec) ctx->use_private_key(asio::buffer(sec.key_pem()), asio::ssl::context::pem, ec);
  if (!ec) ctx->add_certificate_authority(asio::buffer(sec.ca_pem()), ec);
  if (!ec) {
    const bool verify_peer = !server || sec.client_auth();
    ctx->set_verify_mode(verify_peer ? asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert : asio::ssl::verify_none, ec);
  }
  if (ec) return InvalidArgumentError("data path TLS: " + ec.message());
  return ctx;
}

}  // namespace

StatusOr<std::shared_ptr<asio::ssl::context>> MakeServerTlsContext(const TransportSecurity& s) { return Make(s, true); }
StatusOr<std::shared_ptr<asio::ssl::context>> MakeClientTlsContext(const TransportSecurity& s) { return Make(s, false); }

}  // namespace ds41
