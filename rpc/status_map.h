// ds41::Status <-> grpc::Status in one table (STYLE.md §9). Codes map one to one.
#pragma once

#include <grpcpp/support/status.h>

#include "util/status.h"

namespace ds41 {

grpc::Status ToGrpc(const Status& s);
Status FromGrpc(const grpc::Status& s);

}  // namespace ds41
