// Transport security of every gRPC server and channel a ds41 process makes: plaintext, or TLS from
// PEM files (mutual TLS when client_auth). A process has one identity, like gRPC's own globals, so
// mains install it once (InstallTransportSecurity) before any server or channel exists.
//
// TransportSecurity is a value (thread-compatible). The process-wide one is thread-safe: a lock
// guards it, and ProcessTransportSecurity returns a copy.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "util/status.h"

namespace CLI {
class App;
}

namespace ds41 {

struct TlsOptions {
  std::string cert_file;    // this process's certificate chain (PEM); empty: plaintext
  std::string key_file;     // its private key (PEM)
  std::string ca_file;      // CA bundle that peers' certificates must chain to (PEM)
  bool client_auth = true;  // servers require and verify client certificates (mTLS)
  // Name checked against peers' certificates instead of the dialled host: nodes are dialled by pod
  // IP, so a cluster's certificates share one DNS SAN (e.g. "ds41.internal"). Empty: the host.
  std::string server_name;
};

class TransportSecurity {
 public:
  TransportSecurity() = default;  // plaintext
  // Reads and checks the files; a missing or unreadable file, or a cert without key, is an error.
  static StatusOr<TransportSecurity> Load(const TlsOptions& options);

  bool tls() const { return tls_; }
  std::shared_ptr<grpc::ServerCredentials> ServerCredentials() const;
  std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials() const;
  void ApplyTo(grpc::ChannelArguments* args) const;  // the target name override, if any
  // The same identity for transports other than gRPC (the cache's bulk data path).
  bool client_auth() const { return client_auth_; }
  const std::string& cert_pem() const { return cert_; }
  const std::string& key_pem() const { return key_; }
  const std::string& ca_pem() const { return ca_; }
  const std::string& server_name() const { return server_name_; }

 private:
  bool tls_ = false;
  bool client_auth_ = true;
  std::string cert_, key_, ca_, server_name_;
};

// The process's transport security (plaintext until installed).
TransportSecurity ProcessTransportSecurity();
void SetProcessTransportSecurity(TransportSecurity security);

// --tls-cert/--tls-key/--tls-ca/--tls-client-auth/--tls-server-name (env DS41_TLS_CERT, ...).
void AddTlsFlags(CLI::App& app, TlsOptions* options);
// Load + SetProcessTransportSecurity; the error names the offending flag.
Status InstallTransportSecurity(const TlsOptions& options);

}  // namespace ds41
