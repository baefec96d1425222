// The SDK's shared library exports its public API (DDP_API, ddp/export.h) and nothing else:
// internals such as ddp::detail are not ABI. Looked up in the library itself (its dlopen
// handle), not in this test program, which links the internals it tests on its own.
#include <dlfcn.h>

#include <gtest/gtest.h>

namespace ddp_test {
namespace {

TEST(SdkLibraryTest, ExportsThePublicApiAndHidesTheInternals) {
  void* sdk = ::dlopen(SDK_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(sdk, nullptr) << ::dlerror();
  // Public: ddp::nccl_available(), ddp::init_process_group(InitOptions const&),
  // ddp::heartbeat(long).
  for (const char* symbol : {"_ZN3ddp14nccl_availableEv",
                             "_ZN3ddp18init_process_groupERKNS_11InitOptionsE",
                             "_ZN3ddp9heartbeatEl"}) {
    EXPECT_NE(::dlsym(sdk, symbol), nullptr) << symbol << " is not exported";
  }
  // Internal: ddp::detail::write_error_file(char const*, char const*, char const*, long) and
  // ddp::detail::error_file_from_env[abi:cxx11]().
  for (const char* symbol : {"_ZN3ddp6detail16write_error_fileEPKcS2_S2_l",
                             "_ZN3ddp6detail19error_file_from_envB5cxx11Ev"}) {
    EXPECT_EQ(::dlsym(sdk, symbol), nullptr) << symbol << " is exported";
  }
  ::dlclose(sdk);
}

}  // namespace
}  // namespace ddp_test
