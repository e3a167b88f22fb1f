# chat.cmake: `strata chat` driven through a pipe on the demo model (tests/cli/chat_sessions.sh):
# /save and /load in the server's session file, refusals that leave the session untouched, and
# the reasoning folded. Skipped (77) without the demo model.
if(STRATA_BUILD_TESTS)
  add_test(NAME cli_chat_sessions COMMAND ${CMAKE_SOURCE_DIR}/tests/cli/chat_sessions.sh $<TARGET_FILE:strata>)
  set_tests_properties(cli_chat_sessions PROPERTIES LABELS unit SKIP_RETURN_CODE 77 TIMEOUT 120
                       ENVIRONMENT "STRATA_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
endif()
