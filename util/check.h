// DS41_CHECK: aborts with a message when an internal invariant breaks. Only for conditions no input
// can reach; everything an input can cause returns a Status instead (STYLE.md §7 item 2).
#pragma once

#include <cstdlib>
#include <iostream>
#include <sstream>

#define DS41_CHECK(cond, msg)                                                              \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::ostringstream ds41_check_os_;                                                   \
      ds41_check_os_ << msg;                                                               \
      std::cerr << __FILE__ << ":" << __LINE__ << ": check failed: " #cond ": "            \
                << ds41_check_os_.str() << std::endl;                                      \
      std::abort();                                                                        \
    }                                                                                      \
  } while (0)
