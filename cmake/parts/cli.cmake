# cli.cmake: the engine commands' flags. The unit test of their parser (tests/unit/test_cli_options.c)
# is built with the parser's source, which lives in the `strata` command, not in libstrata.
if(STRATA_BUILD_TESTS AND TARGET test_cli_options)
  target_sources(test_cli_options PRIVATE ${CMAKE_SOURCE_DIR}/src/cli/options.c)
endif()

# The shared flags end to end on the demo model (tests/cli/engine_flags.sh): `strata run -p` in
# the chat template (the same answer as `strata chat`), --raw, the README's example, and serve
# with -t, --ctx, --prefill and --kv-type. Skipped (77) without the demo model.
if(STRATA_BUILD_TESTS)
  add_test(NAME cli_engine_flags COMMAND ${CMAKE_SOURCE_DIR}/tests/cli/engine_flags.sh $<TARGET_FILE:strata>)
  set_tests_properties(cli_engine_flags PROPERTIES LABELS unit SKIP_RETURN_CODE 77 TIMEOUT 120
                       ENVIRONMENT "STRATA_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
endif()
