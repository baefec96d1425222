// The SDK's shared library exports its public API (DDP_API, ddp/export.h) and nothing else:
// internals such as ddp::detail are not ABI. Looked up in the library itself (its dlopen
// handle), not in this test program, which links the internals it tests on its own.
#include <dlfcn.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace ddp_test {
namespace {

TEST(SdkLibraryTest, ExportsThePublicApiAndHidesTheInternals) {
  void* sdk = ::dlopen(SDK_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(sdk, nullptr) << ::dlerror();
  // Public: ddp::nccl_available(), ddp::init_process_group(InitOptions const&),
  // ddp::heartbeat(long), ddp::heartbeat(long, double), ddp::stop_job(string const&),
  // ddp::exclude_node(string const&).
  for (const char* symbol :
       {"_ZN3ddp14nccl_availableEv", "_ZN3ddp18init_process_groupERKNS_11InitOptionsE",
        "_ZN3ddp9heartbeatEl", "_ZN3ddp9heartbeatEld",
        "_ZN3ddp8stop_jobERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE",
        "_ZN3ddp12exclude_nodeERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"}) {
    EXPECT_NE(::dlsym(sdk, symbol), nullptr) << symbol << " is not exported";
  }
  // Internal: ddp::detail::write_error_file(char const*, char const*, char const*, long),
  // ddp::detail::error_file_from_env[abi:cxx11]() and the worker channel's
  // ddp::detail::tell_agent_and_exit(char const*, char const*, string const&, int).
  for (const char* symbol :
       {"_ZN3ddp6detail16write_error_fileEPKcS2_S2_l",
        "_ZN3ddp6detail19error_file_from_envB5cxx11Ev",
        "_ZN3ddp6detail19tell_agent_and_exitEPKcS2_RKNSt7__cxx1112basic_stringIcSt11char_"
        "traitsIcESaIcEEEi"}) {
    EXPECT_EQ(::dlsym(sdk, symbol), nullptr) << symbol << " is exported";
  }
  ::dlclose(sdk);
}

// PyTorch's wheels define std::filesystem's functions too (pytorch#133437); torch 2.11's copies
// crash. A program linking the SDK must bind them to libstdc++'s (worker_sdk/CMakeLists.txt,
// DDPRUN_STDCXX_FIRST): the address this program uses is looked up in the library that holds
// it.
TEST(SdkLibraryTest, StdFilesystemBindsToLibstdcxxNotToLibTorch) {
  using RemoveAll = std::uintmax_t (*)(const std::filesystem::path&, std::error_code&);
  RemoveAll remove_all = &std::filesystem::remove_all;
  Dl_info where{};
  ASSERT_NE(::dladdr(reinterpret_cast<void*>(remove_all), &where), 0);
  ASSERT_NE(where.dli_fname, nullptr);
  EXPECT_NE(std::string(where.dli_fname).find("libstdc++"), std::string::npos)
      << "std::filesystem::remove_all comes from " << where.dli_fname;
}

}  // namespace
}  // namespace ddp_test
