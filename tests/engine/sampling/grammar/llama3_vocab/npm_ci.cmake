# cmake -DNPM=... -DSOURCE_DIR=... -DPREFIX=... -P npm_ci.cmake
# Copies package.json and package-lock.json to PREFIX and runs
# `npm ci --prefix PREFIX`. A failure is a warning, not a build error: the
# modules stay absent and the tests that need the Llama 3 vocabulary skip,
# naming why.
file(COPY ${SOURCE_DIR}/package.json ${SOURCE_DIR}/package-lock.json
     DESTINATION ${PREFIX})
execute_process(
  COMMAND ${NPM} ci --prefix ${PREFIX} --no-audit --no-fund
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  file(REMOVE ${PREFIX}/node_modules/.package-lock.json)
  message(WARNING "npm ci failed (${rc}): llama3_vocab_test, "
                  "maskbench_sample_test and bench/maskbench skip until "
                  "`npm ci --prefix ${PREFIX}` succeeds")
endif()
