# Run by `cmake --install` (component service, cmake/Packaging.cmake): the systemd units with
# ExecStart pointing at this install's programs. Given DDPRUN_UNITS, DDPRUN_UNITS_BINDIR
# (relative to the prefix) and DDPRUN_UNITS_STAGING (a directory of the build).
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(unit_dir /lib/systemd/system)
else()
  set(unit_dir "${CMAKE_INSTALL_PREFIX}/lib/systemd/system")
endif()
file(MAKE_DIRECTORY "${DDPRUN_UNITS_STAGING}")
set(staged)
foreach(unit IN LISTS DDPRUN_UNITS)
  get_filename_component(name "${unit}" NAME)
  file(READ "${unit}" text)
  string(REPLACE "ExecStart=/usr/bin/" "ExecStart=${CMAKE_INSTALL_PREFIX}/${DDPRUN_UNITS_BINDIR}/"
    text "${text}")
  file(WRITE "${DDPRUN_UNITS_STAGING}/${name}" "${text}")
  list(APPEND staged "${DDPRUN_UNITS_STAGING}/${name}")
endforeach()
# file(INSTALL) applies DESTDIR and records the files in install_manifest.txt.
file(INSTALL ${staged} DESTINATION "${unit_dir}"
  FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
