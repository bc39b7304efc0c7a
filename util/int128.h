// 128-bit unsigned integer (a GCC/Clang extension; __extension__ keeps -Wpedantic quiet).
#pragma once

namespace ds41 {
__extension__ typedef unsigned __int128 uint128;
}  // namespace ds41
