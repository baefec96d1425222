// DDPRUN_UNDER_ASAN: 1 when the including file is compiled with AddressSanitizer, by GCC
// (__SANITIZE_ADDRESS__) or by clang (__has_feature), else 0. For the rare test that cannot run
// in a sanitizer build's time (each such skip is listed in .ci/allowed-skips.txt).
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define DDPRUN_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DDPRUN_UNDER_ASAN 1
#endif
#endif
#ifndef DDPRUN_UNDER_ASAN
#define DDPRUN_UNDER_ASAN 0
#endif
