// ds41::Status <-> grpc::Status through util/error_table.h. Codes map one to one, messages are kept;
// a code number no ds41 code has (a newer or broken peer) arrives as UNKNOWN, never as OK.
#pragma once

#include <grpcpp/support/status.h>

#include "util/status.h"

namespace ds41 {

grpc::Status ToGrpc(const Status& s);
Status FromGrpc(const grpc::Status& s);

}  // namespace ds41
