#include "rpc/transport_security.h"

#include <CLI/CLI.hpp>
#include <fstream>
#include <sstream>

#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace ds41 {
namespace {

StatusOr<std::string> ReadPem(const std::string& flag, const std::string& path) {
  if (path.empty()) return InvalidArgumentError(flag + " is required when --tls-cert is set");
  std::ifstream f(path, std::ios::binary);
  if (!f) return InvalidArgumentError(flag + ": cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string pem = ss.str();
  if (pem.find("-----BEGIN ") == std::string::npos) return InvalidArgumentError(flag + ": " + path + " is not PEM");
  return pem;
}

Mutex g_mu;
// The process's settings, read and replaced under g_mu.
TransportSecurity& Global() DS41_REQUIRES(g_mu) {
  static TransportSecurity s;
  return s;
}

}  // namespace

StatusOr<TransportSecurity> TransportSecurity::Load(const TlsOptions& o) {
  TransportSecurity s;
  if (o.cert_file.empty()) {
    if (!o.key_file.empty() || !o.ca_file.empty())
      return InvalidArgumentError("--tls-key/--tls-ca given without --tls-cert");
    return s;
  }
  auto cert = ReadPem("--tls-cert", o.cert_file);
  if (!cert.ok()) return cert.status();
  auto key = ReadPem("--tls-key", o.key_file);
  if (!key.ok()) return key.status();
  auto ca = ReadPem("--tls-ca", o.ca_file);
  if (!ca.ok()) return ca.status();
  s.tls_ = true;
  s.client_auth_ = o.client_auth;
  s.cert_ = std::move(*cert);
  s.key_ = std::move(*key);
  s.ca_ = std::move(*ca);
  s.server_name_ = o.server_name;
  return s;
}

std::shared_ptr<grpc::ServerCredentials> TransportSecurity::ServerCredentials() const {
  if (!tls_) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions o(client_auth_ ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                                   : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  o.pem_root_certs = ca_;
  o.pem_key_cert_pairs.push_back({key_, cert_});
  return grpc::SslServerCredentials(o);
}

std::shared_ptr<grpc::ChannelCredentials> TransportSecurity::ChannelCredentials() const {
  if (!tls_) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = ca_;
  // Presented always: harmless where the server does not ask, required where it does.
  o.pem_private_key = key_;
  o.pem_cert_chain = cert_;
  return grpc::SslCredentials(o);
}

void TransportSecurity::ApplyTo(grpc::ChannelArguments* args) const {
  if (tls_ && !server_name_.empty()) args->SetSslTargetNameOverride(server_name_);
}

TransportSecurity ProcessTransportSecurity() {
  MutexLock l(&g_mu);
  return Global();
}

void SetProcessTransportSecurity(TransportSecurity security) {
  MutexLock l(&g_mu);
  Global() = std::move(security);
}

void AddTlsFlags(CLI::App& app, TlsOptions* o) {
  app.add_option("--tls-cert", o->cert_file, "PEM certificate chain; enables TLS on every gRPC server and channel")
      ->envname("DS41_TLS_CERT");
  app.add_option("--tls-key", o->key_file, "PEM private key of --tls-cert")->envname("DS41_TLS_KEY");
  app.add_option("--tls-ca", o->ca_file, "PEM CA bundle that peers' certificates must chain to")->envname("DS41_TLS_CA");
  app.add_option("--tls-client-auth", o->client_auth, "servers require client certificates (mutual TLS)")
      ->envname("DS41_TLS_CLIENT_AUTH");
  app.add_option("--tls-server-name", o->server_name, "name checked in peers' certificates instead of the host dialled")
      ->envname("DS41_TLS_SERVER_NAME");
}

Status InstallTransportSecurity(const TlsOptions& options) {
  auto s = TransportSecurity::Load(options);
  if (!s.ok()) return s.status();
  SetProcessTransportSecurity(std::move(*s));
  return Status::Ok();
}

}  // namespace ds41
