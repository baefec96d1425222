# Compiler settings shared by every target of the project.

# Sanitizers apply to every target, test binaries included, so that everything links.
if(DDPRUN_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
  # Clang's UBSan "function" check (indirect calls through mistyped function pointers; GCC
  # has none) cannot compile split coroutines in clang 14 ("Cannot represent a difference
  # across sections"): every Asio coroutine file failed. The rest of UBSan stays on.
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    add_compile_options(-fno-sanitize=function)
  endif()
endif()

# Asio's coroutines (C++20): GCC 11 and later enable them with -std=c++20; GCC 10 needs
# -fcoroutines. One place, for every target, so that no library forces a GCC flag on others.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 11)
  add_compile_options(-fcoroutines)
endif()
# Clang has C++20 coroutines, but Boost.Asio before 1.80 looks for them only in libc++'s
# <experimental/coroutine>: with libstdc++ (Debian's clang), say that <coroutine> is there.
# Its awaitable.hpp then uses std::exchange without including <utility>: included first.
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang" AND Boost_VERSION VERSION_LESS 1.80)
  add_compile_definitions(BOOST_ASIO_HAS_CO_AWAIT=1 BOOST_ASIO_HAS_STD_COROUTINE=1)
  add_compile_options("SHELL:-include utility")
endif()

# DDPRUN_UNITY_BUILD: the libraries, programs and tests (not benchmarks or fuzz targets)
# compile in batches of files (CMake's unity build), parsing the Asio, Beast, GoogleTest and
# LibTorch headers once per batch: a clean build is much quicker (the tests of build/: 877
# CPU-s file by file, 556 in batches), an incremental one slower. For CI's clean builds
# (scripts/run-tests.sh); off by default. In a batch, names at namespace scope (anonymous
# namespaces included) are shared by its files: two test files of one program cannot both
# define a helper `contains` or a class `RecordingPeer`; the build says so.
# DDPRUN_UNITY_BUILD=TESTS batches only the tests: the product compiles file by file, so a
# product file that compiles only beside the others of its batch (an include it lacks) fails
# there (CI's sanitizer build).
function(ddprun_unity_build target)
  file(RELATIVE_PATH where ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  set(batched OFF)
  if(DDPRUN_UNITY_BUILD STREQUAL "TESTS")
    if(where MATCHES "^tests(/|$)")
      set(batched ON)
    endif()
  elseif(DDPRUN_UNITY_BUILD AND NOT where MATCHES "^(bench|fuzz)(/|$)")
    set(batched ON)
  endif()
  if(batched)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON)
    # In a batch every source is an included file, and GCC then warns about each coroutine
    # frame holding a type from an anonymous namespace: true of every file, and harmless.
    target_compile_options(${target} PRIVATE $<$<CXX_COMPILER_ID:GNU>:-Wno-subobject-linkage>)
  endif()
endfunction()

# ddprun_target_defaults(<target>): warnings on for the project's own libraries and programs.
function(ddprun_target_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wno-unused-parameter)
  ddprun_unity_build(${target})
endfunction()

# Targets that include LibTorch headers: LibTorch's own headers are not -Wextra clean.
function(ddprun_torch_target_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wno-unused-parameter)
  ddprun_unity_build(${target})
endfunction()
