# Compiler settings shared by every target of the project.

# Sanitizers apply to every target, test binaries included, so that everything links.
if(DDPRUN_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()

# ddprun_target_defaults(<target>): warnings on for the project's own libraries and programs.
function(ddprun_target_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wno-unused-parameter)
endfunction()

# Targets that include LibTorch headers: LibTorch's own headers are not -Wextra clean.
function(ddprun_torch_target_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wno-unused-parameter)
endfunction()
