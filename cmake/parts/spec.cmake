# spec.cmake: speculative decoding changes no text, end to end on the demo model and its MTP head
# (tests/cli/spec_exact.sh): run, chat and bench with --spec mtp|ngram against --spec none,
# greedy and sampled. Skipped (77) without the demo model.
if(STRATA_BUILD_TESTS)
  add_test(NAME cli_spec_exact COMMAND ${CMAKE_SOURCE_DIR}/tests/cli/spec_exact.sh $<TARGET_FILE:strata>)
  set_tests_properties(cli_spec_exact PROPERTIES LABELS unit SKIP_RETURN_CODE 77 TIMEOUT 300
                       ENVIRONMENT "STRATA_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
endif()

# The MTP head's draft logits against llama.cpp's MTP context (tests/conformance/mtp_peer.c, label
# conformance): needs the peer's source build (tools/peer-build.sh) for its libllama with the MTP
# context; skipped (77) without it.
if(STRATA_BUILD_TESTS AND STRATA_LLAMA_INCLUDE AND STRATA_GGML_INCLUDE)
  add_executable(mtp_peer ${CMAKE_SOURCE_DIR}/tests/conformance/mtp_peer.c)
  target_include_directories(mtp_peer PRIVATE ${STRATA_LLAMA_INCLUDE} ${STRATA_GGML_INCLUDE} ${CMAKE_SOURCE_DIR}/tests)
  target_link_libraries(mtp_peer PRIVATE strata_static dl m)
  add_test(NAME conformance_mtp COMMAND mtp_peer --lib ${CMAKE_SOURCE_DIR}/.peer/llama.cpp/build/bin/libllama.so)
  set_tests_properties(conformance_mtp PROPERTIES LABELS conformance SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()
