#include "util/amx.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace ds41 {

bool AmxGranted() {
#if defined(__x86_64__)
  static const bool granted = [] {
    // CPUID leaf 7 subleaf 0 EDX bits 22, 24 and 25: AMX-BF16, AMX-TILE, AMX-INT8 (named here because
    // not every compiler's __builtin_cpu_supports knows them).
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
    constexpr unsigned kAmx = (1u << 22) | (1u << 24) | (1u << 25);
    if ((edx & kAmx) != kAmx) return false;
    // Linux hands the tile data state (XFEATURE_XTILEDATA = 18) only to a process that asks for it.
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return granted;
#else
  return false;
#endif
}

}  // namespace ds41
