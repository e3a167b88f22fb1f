# spec.cmake: speculative decoding changes no text, end to end on the demo model and its MTP head
# (tests/cli/spec_exact.sh): run, chat and bench with --spec mtp|ngram against --spec none,
# greedy and sampled. Skipped (77) without the demo model.
if(STRATA_BUILD_TESTS)
  add_test(NAME cli_spec_exact COMMAND ${CMAKE_SOURCE_DIR}/tests/cli/spec_exact.sh $<TARGET_FILE:strata>)
  set_tests_properties(cli_spec_exact PROPERTIES LABELS unit SKIP_RETURN_CODE 77 TIMEOUT 300
                       ENVIRONMENT "STRATA_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
endif()
