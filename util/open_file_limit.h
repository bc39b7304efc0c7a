// Raises the process's open-file limit to its hard maximum: the cache service holds one read
// descriptor per payload segment file (two where reads use O_DIRECT), and a multi-terabyte store has
// tens of thousands of them, past the usual soft limit of 1024.
#pragma once

#include <sys/resource.h>

namespace ds41 {

inline void RaiseOpenFileLimit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &r);
  }
}

}  // namespace ds41
