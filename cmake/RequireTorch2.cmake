# DDPRUN_REQUIRE_TORCH2=ON (CI, scripts/run-tests.sh): the configure fails unless the tests'
# torch 2.x interpreter is there and imports torch 2.x. Without it tests/CMakeLists.txt leaves
# out every "<test>.torch2" copy, and the suite would pass with half its Python torch tests
# never registered. Off by default: a developer without .venv/torch2 gets the 1.13 copies only
# (the configure says so).
option(DDPRUN_REQUIRE_TORCH2 "Fail the configure when the tests' torch 2.x Python is missing" OFF)
if(DDPRUN_REQUIRE_TORCH2)
  # The same interpreter tests/CMakeLists.txt picks: DDPRUN_TEST_PYTHON2, else .venv/torch2.
  set(torch2_python "${DDPRUN_TEST_PYTHON2}")
  if(NOT torch2_python)
    set(torch2_python "${PROJECT_SOURCE_DIR}/.venv/torch2/bin/python")
  endif()
  if(NOT EXISTS "${torch2_python}")
    message(FATAL_ERROR "DDPRUN_REQUIRE_TORCH2: no torch 2.x Python at ${torch2_python}, so the "
      "tests' .torch2 copies would be left out: run scripts/setup.sh (it makes .venv/torch2), "
      "or set DDPRUN_TEST_PYTHON2")
  endif()
  execute_process(COMMAND "${torch2_python}" -c "import torch; print(torch.__version__)"
    OUTPUT_VARIABLE torch2_version ERROR_VARIABLE torch2_error RESULT_VARIABLE torch2_result
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT torch2_result EQUAL 0 OR NOT torch2_version MATCHES "^2\\.")
    message(FATAL_ERROR "DDPRUN_REQUIRE_TORCH2: ${torch2_python} does not import torch 2.x "
      "(version '${torch2_version}', exit ${torch2_result}): ${torch2_error}")
  endif()
endif()
