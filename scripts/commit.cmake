# Writes OUT (a header defining HYPIC_COMMIT, the short hash of SRC's HEAD, or "unknown"
# outside a git checkout); rewritten only when the hash changes, so a build that moves no
# commit recompiles nothing. Run by the build (CMakeLists.txt: hypic_commit).
execute_process(COMMAND git -C "${SRC}" rev-parse --short HEAD
                OUTPUT_VARIABLE commit ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT commit)
  set(commit "unknown")
endif()
set(text "#define HYPIC_COMMIT \"${commit}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE "${OUT}" "${text}")
endif()
