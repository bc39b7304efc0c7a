// A throwaway PKI for TLS tests, made with the openssl command: a CA, a certificate for every role
// (DNS SAN "ds41.internal" only, so dialling 127.0.0.1 needs the target-name override), and a
// certificate from a second, untrusted CA.
#pragma once

#include <string>

namespace ds41::testing {

struct TestPki {
  std::string dir;
  std::string ca;                    // ca.crt
  std::string cert, key;             // signed by ca, SAN DNS:ds41.internal
  std::string rogue_cert, rogue_key; // signed by another CA
  static constexpr const char* kServerName = "ds41.internal";
};

// Writes the files under a new temporary folder; dir is empty when openssl failed.
TestPki MakeTestPki();

}  // namespace ds41::testing
