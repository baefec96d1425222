# What `cmake --install` installs besides the programs and the SDK (their rules sit with their
# targets), and the Debian packages CPack makes from those same install rules:
#   cpack --config <build>/CPackConfig.cmake -G DEB    -> ddprun_<v>-1_amd64.deb
#                                                         (libddprun-dev_<v>-1_amd64.deb with the SDK)
# See docs/packaging.md for why CPack and not debhelper.
set(DDPRUN_PACKAGING_DIR ${PROJECT_SOURCE_DIR}/packaging/deb)

# ---- systemd units (component service) ----
# The units say ExecStart=/usr/bin/..., the package's path. At install time (not configure
# time: CPack installs this build with its own prefix) they are rewritten to the prefix's
# bindir, and go to /lib/systemd/system for the /usr prefix (where Debian keeps units:
# lintian refuses /usr/lib/systemd/system on bookworm), else <prefix>/lib/systemd/system
# (systemd reads /usr/local/lib/systemd/system too).
file(GLOB DDPRUN_UNITS ${PROJECT_SOURCE_DIR}/configs/systemd/*.service)
install(CODE "set(DDPRUN_UNITS \"${DDPRUN_UNITS}\")
set(DDPRUN_UNITS_BINDIR \"${CMAKE_INSTALL_BINDIR}\")
set(DDPRUN_UNITS_STAGING \"${CMAKE_CURRENT_BINARY_DIR}/packaging/units\")"
  COMPONENT service)
install(SCRIPT ${PROJECT_SOURCE_DIR}/cmake/InstallUnits.cmake COMPONENT service)

# ---- the `ddprun` Python module (component runtime) ----
# `import ddprun` for scripts (ddprun.heartbeat(), ddprun.waiting(): docs/progress.md), where
# Debian's python3 finds it; a wheel ships the same package itself (pyproject.toml).
if(NOT SKBUILD)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/ddprun DESTINATION lib/python3/dist-packages
    COMPONENT runtime FILES_MATCHING PATTERN "*.py")
endif()

# ---- example configs (component doc) ----
set(DDPRUN_EXAMPLES_DIR ${CMAKE_INSTALL_DOCDIR}/examples)
file(GLOB DDPRUN_EXAMPLE_CONFIGS ${PROJECT_SOURCE_DIR}/configs/*.yaml)
install(FILES ${DDPRUN_EXAMPLE_CONFIGS} DESTINATION ${DDPRUN_EXAMPLES_DIR} COMPONENT doc)
install(PROGRAMS ${PROJECT_SOURCE_DIR}/configs/health-check.sh
  DESTINATION ${DDPRUN_EXAMPLES_DIR} COMPONENT doc)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/configs/slurm ${PROJECT_SOURCE_DIR}/configs/prometheus
  ${PROJECT_SOURCE_DIR}/configs/grafana DESTINATION ${DDPRUN_EXAMPLES_DIR} COMPONENT doc)

# ---- Debian's copyright, changelog.Debian.gz and lintian overrides, per package ----
# Reproducible: the date honours SOURCE_DATE_EPOCH, gzip -n stores no name or time.
set(DDPRUN_DEB_MAINTAINER "ddprun maintainers <maintainers@users.noreply.a-seed-c8fb3ee3.example>"
  CACHE STRING "Maintainer field of the Debian packages")
set(DDPRUN_DEB_RELEASE 1 CACHE STRING "Debian revision of the packages")
string(TIMESTAMP DDPRUN_DEB_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
configure_file(${DDPRUN_PACKAGING_DIR}/changelog.in
  ${CMAKE_CURRENT_BINARY_DIR}/packaging/changelog.Debian @ONLY)
find_program(DDPRUN_GZIP gzip)
if(DDPRUN_GZIP)
  execute_process(COMMAND ${DDPRUN_GZIP} -9nc ${CMAKE_CURRENT_BINARY_DIR}/packaging/changelog.Debian
    OUTPUT_FILE ${CMAKE_CURRENT_BINARY_DIR}/packaging/changelog.Debian.gz COMMAND_ERROR_IS_FATAL ANY)
  set(DDPRUN_DEB_DOCS ${DDPRUN_PACKAGING_DIR}/copyright
    ${CMAKE_CURRENT_BINARY_DIR}/packaging/changelog.Debian.gz)
  install(FILES ${DDPRUN_DEB_DOCS} DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/ddprun COMPONENT doc)
  install(FILES ${DDPRUN_PACKAGING_DIR}/ddprun.lintian-overrides
    DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides RENAME ddprun COMPONENT doc)
  if(TARGET ddprun_worker_sdk)
    install(FILES ${DDPRUN_DEB_DOCS} DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/libddprun-dev
      COMPONENT worker_sdk)
    install(FILES ${DDPRUN_PACKAGING_DIR}/libddprun-dev.lintian-overrides
      DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides RENAME libddprun-dev
      COMPONENT worker_sdk)
  endif()
endif()

# ---- CPack: DEB, one package per group ----
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ddprun)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${DDPRUN_DEB_MAINTAINER}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_INSTALL_PREFIX /usr)  # the prefix CPack installs with under DESTDIR (below)
# DESTDIR staging: the units' absolute /lib/systemd/system lands in the package, never on
# this machine, and the install scripts see the package's own prefix (/usr).
set(CPACK_SET_DESTDIR ON)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ONE_PER_GROUP)
set(CPACK_COMPONENTS_ALL runtime service doc)
# libddprun-dev holds architecture-specific files (the library, ddprun.pc naming LibTorch's
# multiarch directory): Debian wants them in the multiarch libdir, which GNUInstallDirs
# chooses only for the /usr prefix. A build for another prefix (build/ is /usr/local) makes
# the ddprun package alone.
if(TARGET ddprun_worker_sdk AND CMAKE_INSTALL_LIBDIR MATCHES "^lib/${CMAKE_LIBRARY_ARCHITECTURE}$")
  list(APPEND CPACK_COMPONENTS_ALL worker_sdk)
elseif(TARGET ddprun_worker_sdk)
  message(STATUS "Packaging: libddprun-dev only from a build with -DCMAKE_INSTALL_PREFIX=/usr "
    "(libdir ${CMAKE_INSTALL_LIBDIR} is not multiarch)")
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # <name>_<version>-<release>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_RELEASE ${DDPRUN_DEB_RELEASE})
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Depends from the ELF files' needs (dpkg-shlibdeps), not written by hand.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_DDPRUN_PACKAGE_NAME ddprun)
set(CPACK_DEBIAN_DDPRUN_PACKAGE_SECTION utils)
# adduser: postinst makes the ddprun system user with it.
# python3: the `ddprun` module for scripts lives in its dist-packages (and ddprun runs Python
# workers; lintian's python-package-missing-depends-on-python).
set(CPACK_DEBIAN_DDPRUN_PACKAGE_DEPENDS "adduser, python3")
set(CPACK_DEBIAN_DDPRUN_PACKAGE_CONTROL_EXTRA
  "${DDPRUN_PACKAGING_DIR}/postinst;${DDPRUN_PACKAGING_DIR}/prerm;${DDPRUN_PACKAGING_DIR}/postrm")
set(CPACK_DEBIAN_DDPRUN_DESCRIPTION "elastic launcher for PyTorch distributed training
ddprun takes torchrun's command line and runs a node's workers with an
event-driven agent; ddp-rendezvous is the standalone rendezvous daemon for a
head node.

This package holds both programs, the OpenSSL module for tokens and TLS,
the systemd units (enabled by nobody until the administrator does) and
example configurations.")

set(CPACK_DEBIAN_SDK_PACKAGE_NAME libddprun-dev)
set(CPACK_DEBIAN_SDK_PACKAGE_SECTION libdevel)
# The SDK's headers include LibTorch's, and its CMake package finds Torch: Debian's LibTorch.
set(CPACK_DEBIAN_SDK_PACKAGE_DEPENDS "libtorch-dev")
set(CPACK_DEBIAN_SDK_DESCRIPTION "C++ worker SDK of ddprun (LibTorch DDP)
The worker SDK for C++ training programs launched by ddprun or torchrun:
process groups, collectives, DistributedDataParallel and snapshots on
LibTorch.

This package holds the headers, the shared library, the CMake package
(find_package(ddprun)) and the pkg-config file.")
# The library's shlibs file (what dpkg-shlibdeps writes into the Depends of a program linking
# it) and the ldconfig trigger, which CPack 3.25 does not make for a component package (it
# calls ldconfig from generated maintainer scripts instead, which lintian refuses).
if(TARGET ddprun_worker_sdk)
  set(DDPRUN_SDK_SONAME_VERSION "${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}")
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/packaging/sdk/shlibs
    "libddprun_worker_sdk ${DDPRUN_SDK_SONAME_VERSION} libddprun-dev (>= ${PROJECT_VERSION})\n")
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/packaging/sdk/triggers "activate-noawait ldconfig\n")
  set(CPACK_DEBIAN_SDK_PACKAGE_CONTROL_EXTRA
    "${CMAKE_CURRENT_BINARY_DIR}/packaging/sdk/shlibs;${CMAKE_CURRENT_BINARY_DIR}/packaging/sdk/triggers"
    "${DDPRUN_PACKAGING_DIR}/sdk/postinst;${DDPRUN_PACKAGING_DIR}/sdk/postrm")
endif()

include(CPack)
cpack_add_component_group(ddprun)
cpack_add_component_group(sdk)
cpack_add_component(runtime GROUP ddprun)
cpack_add_component(service GROUP ddprun)
cpack_add_component(doc GROUP ddprun)
if(TARGET ddprun_worker_sdk)
  cpack_add_component(worker_sdk GROUP sdk)
endif()
