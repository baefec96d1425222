# Where `cmake --install` puts the programs and the security module, for the three ways
# ddprun is installed (docs/packaging.md): a prefix (`cmake --install`, the Debian package
# made by CPack from it), or a Python wheel built by scikit-build-core (SKBUILD is set).
#
# Components: runtime (ddprun, ddp-rendezvous, the security module), service (systemd units),
# examples (example configs, Debian's copyright and changelog), worker_sdk (worker_sdk/).
include(GNUInstallDirs)

if(SKBUILD)
  # A wheel: the programs go to the environment's bin/ (the wheel's scripts), the module to
  # <environment>/lib/ddprun (the data scheme is the environment's root), so that it sits at
  # ../lib/ddprun from the programs, as under a prefix.
  set(DDPRUN_INSTALL_BINDIR "${SKBUILD_SCRIPTS_DIR}")
  set(DDPRUN_INSTALL_MODULEDIR "${SKBUILD_DATA_DIR}/lib/ddprun")
  set(DDPRUN_MODULEDIR_FROM_BINDIR "../lib/ddprun")
  set(DDPRUN_INSTALL_FULL_MODULEDIR "${CMAKE_INSTALL_FULL_LIBDIR}/ddprun")
else()
  set(DDPRUN_INSTALL_BINDIR "${CMAKE_INSTALL_BINDIR}")
  # lib/ddprun, not the libdir: a private module, which Debian keeps in /usr/lib/<package>
  # whatever the multiarch libdir of a /usr prefix is (lib/x86_64-linux-gnu).
  set(DDPRUN_INSTALL_MODULEDIR "lib/ddprun")
  set(DDPRUN_INSTALL_FULL_MODULEDIR "${CMAKE_INSTALL_PREFIX}/lib/ddprun")
  # The programs find the module relative to themselves, so a relocated prefix (a package
  # built with another prefix than the build's) still finds it.
  file(RELATIVE_PATH DDPRUN_MODULEDIR_FROM_BINDIR "/${CMAKE_INSTALL_BINDIR}"
    "/${DDPRUN_INSTALL_MODULEDIR}")
endif()
