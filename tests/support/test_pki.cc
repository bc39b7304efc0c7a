#include "tests/support/test_pki.h"

#include <cstdlib>
#include <fstream>

#include "tests/support/test_checkpoint.h"

namespace ds41::testing {
namespace {

bool OpenSsl(const std::string& dir, const std::string& args) {
  return std::system(("cd '" + dir + "' && openssl " + args + " >/dev/null 2>&1").c_str()) == 0;
}

}  // namespace

TestPki MakeTestPki() {
  TestPki p;
  const std::string d = TempDir("pki");
  {
    std::ofstream ext(d + "/san.ext");
    ext << "subjectAltName=DNS:" << TestPki::kServerName << "\nextendedKeyUsage=serverAuth,clientAuth\n";
  }
  auto ca = [&](const std::string& n) {
    return OpenSsl(d, "req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=" + n + "-ca -keyout " + n + "-ca.key -out " +
                          n + "-ca.crt");
  };
  auto leaf = [&](const std::string& n, const std::string& issuer) {
    return OpenSsl(d, "req -newkey rsa:2048 -nodes -subj /CN=" + n + " -keyout " + n + ".key -out " + n + ".csr") &&
           OpenSsl(d, "x509 -req -in " + n + ".csr -CA " + issuer + "-ca.crt -CAkey " + issuer +
                          "-ca.key -CAcreateserial -days 2 -extfile san.ext -out " + n + ".crt");
  };
  if (!ca("trusted") || !ca("rogue") || !leaf("node", "trusted") || !leaf("intruder", "rogue")) return p;
  p.dir = d;
  p.ca = d + "/trusted-ca.crt";
  p.cert = d + "/node.crt";
  p.key = d + "/node.key";
  p.rogue_cert = d + "/intruder.crt";
  p.rogue_key = d + "/intruder.key";
  return p;
}

}  // namespace ds41::testing
