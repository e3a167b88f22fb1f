# default_model.cmake: `strata run` without -m finds and runs the shipped demo model, and says so;
# with STRATA_MODEL pointing nowhere it fails with a message naming the variable's file.
if(STRATA_BUILD_TESTS)
  add_test(NAME cli_default_model COMMAND sh -c "
    set -e
    out=$(env -u STRATA_MODEL $<TARGET_FILE:strata> run -p 'What is an ocean?' -n 4 --temp 0 2>err.txt)
    grep -q 'using the demo model' err.txt
    grep -q 'generated' err.txt
    if STRATA_MODEL=/nonexistent.gguf $<TARGET_FILE:strata> run -p hi -n 1 2>err2.txt; then exit 1; fi
    grep -q '/nonexistent.gguf' err2.txt
  " WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
  set_tests_properties(cli_default_model PROPERTIES LABELS unit)
endif()
