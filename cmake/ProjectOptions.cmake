# Compiler settings shared by every target of the project.

# ddprun_target_defaults(<target>): warnings on, and sanitizers when DDPRUN_SANITIZE is set.
function(ddprun_target_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wno-unused-parameter)
  if(DDPRUN_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
endfunction()

# Targets that include LibTorch headers: LibTorch's own headers are not -Wextra clean.
function(ddprun_torch_target_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wno-unused-parameter)
endfunction()
