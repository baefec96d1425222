# DDPRUN_STATIC_DEPS (the wheel, pyproject.toml): the programs carry fmt, spdlog, yaml-cpp and
# SQLite inside them, so that a wheel built here runs on a machine without Debian's -dev
# libraries. What is left to the system is glibc, libstdc++ and libgcc_s (in every base
# system) and, for the security module only, OpenSSL 3 (docs/packaging.md).
#
# Debian ships no static fmt or spdlog: their header-only forms compile into each program.
# The targets keep the names the components link (fmt::fmt, spdlog::spdlog, yaml-cpp), so no
# component's CMakeLists.txt knows which form it gets.
add_library(fmt::fmt INTERFACE IMPORTED)
set_target_properties(fmt::fmt PROPERTIES INTERFACE_COMPILE_DEFINITIONS "FMT_HEADER_ONLY=1")
add_library(spdlog::spdlog INTERFACE IMPORTED)
set_target_properties(spdlog::spdlog PROPERTIES
  INTERFACE_COMPILE_DEFINITIONS "SPDLOG_FMT_EXTERNAL"
  INTERFACE_LINK_LIBRARIES "fmt::fmt;Threads::Threads")

find_library(DDPRUN_YAML_CPP_ARCHIVE NAMES libyaml-cpp.a REQUIRED)
add_library(yaml-cpp STATIC IMPORTED)
set_target_properties(yaml-cpp PROPERTIES IMPORTED_LOCATION "${DDPRUN_YAML_CPP_ARCHIVE}")

# FindSQLite3 (rendezvous/state) takes the library from this cache entry when it is set.
find_library(SQLite3_LIBRARY NAMES libsqlite3.a REQUIRED)

# OpenSSL inside the security module too (FindOpenSSL, rendezvous/): no manylinux policy lets a
# wheel need the system's libssl/libcrypto, and OpenSSL 3 is not on every Linux. The module
# keeps OpenSSL's symbols to itself (--exclude-libs, rendezvous/CMakeLists.txt), which also
# lets Debian's archives, built position-independent for executables only, link into it.
set(OPENSSL_USE_STATIC_LIBS TRUE)
