# npm packages for a test, pinned by the package-lock.json beside its
# package.json. One file, two uses:
#
# include()d, it defines
#   paceline_npm_ci(TARGET <name> FOR <tests>)
# which installs the current source dir's package.json + package-lock.json
# into ${CMAKE_CURRENT_BINARY_DIR}/node_modules with `npm ci` (target
# <name>, part of ALL, rerun when either file or this one changes). Without
# npm it adds no target and says so; <tests> names who goes without.
#
# Run with -P by that target (NPM, SOURCE_DIR, PREFIX, FOR set with -D), it
# copies the two files to PREFIX and runs `npm ci --prefix PREFIX`. A
# failure (no registry) is a warning, not a build error: the modules stay
# absent and <tests> skip or fail, each naming why.

if(CMAKE_SCRIPT_MODE_FILE)
  file(COPY ${SOURCE_DIR}/package.json ${SOURCE_DIR}/package-lock.json
       DESTINATION ${PREFIX})
  execute_process(
    COMMAND ${NPM} ci --prefix ${PREFIX} --no-audit --no-fund
    RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    file(REMOVE ${PREFIX}/node_modules/.package-lock.json)
    message(WARNING "npm ci failed (${rc}): ${FOR} go without the packages "
                    "until `npm ci --prefix ${PREFIX}` succeeds")
  endif()
  return()
endif()

function(paceline_npm_ci)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "TARGET;FOR" "")
  find_program(PACELINE_NPM npm)
  if(NOT PACELINE_NPM)
    message(STATUS "npm not found: ${arg_FOR} go without their packages")
    return()
  endif()
  set(script ${CMAKE_CURRENT_FUNCTION_LIST_FILE})
  set(src ${CMAKE_CURRENT_SOURCE_DIR})
  set(prefix ${CMAKE_CURRENT_BINARY_DIR})
  # npm ci writes this last: its presence means the install finished.
  set(stamp ${prefix}/node_modules/.package-lock.json)
  add_custom_command(OUTPUT ${stamp}
    COMMAND ${CMAKE_COMMAND}
      -DNPM=${PACELINE_NPM} -DSOURCE_DIR=${src} -DPREFIX=${prefix}
      -DFOR=${arg_FOR}
      -P ${script}
    DEPENDS ${src}/package.json ${src}/package-lock.json
            ${script}
    COMMENT "npm ci: the packages of ${arg_FOR}"
    VERBATIM)
  add_custom_target(${arg_TARGET} ALL DEPENDS ${stamp})
endfunction()
