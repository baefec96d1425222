# Compiler settings shared by every target of the project.

# Sanitizers apply to every target, test binaries included, so that everything links.
if(DDPRUN_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()

# Asio's coroutines (C++20): GCC 11 and later enable them with -std=c++20; GCC 10 needs
# -fcoroutines. One place, for every target, so that no library forces a GCC flag on others.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 11)
  add_compile_options(-fcoroutines)
endif()

# ddprun_target_defaults(<target>): warnings on for the project's own libraries and programs.
function(ddprun_target_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wno-unused-parameter)
endfunction()

# Targets that include LibTorch headers: LibTorch's own headers are not -Wextra clean.
function(ddprun_torch_target_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wno-unused-parameter)
endfunction()
