# train_demo.cmake: the shipped demo model (models/strata-demo-q8_0.gguf) against llama.cpp.
#
#   demo_model_greedy   tools/train-demo/check.py --greedy-only: for the five sample prompts of the
#                       training run, Strata's and llama.cpp's greedy continuations must agree token
#                       for token; they may part only at a near tie (each engine's token the other's
#                       runner-up by at most 0.25 logits), which the test prints. Label
#                       `conformance`; skipped (77) without the peer library, logits_peer or python3.
if(STRATA_BUILD_TESTS)
  find_program(STRATA_PYTHON3 python3)
  if(STRATA_PYTHON3)
    add_test(NAME demo_model_greedy
             COMMAND ${STRATA_PYTHON3} ${CMAKE_SOURCE_DIR}/tools/train-demo/check.py --greedy-only --near-tie 0.25
                     --strata ${CMAKE_BINARY_DIR}/strata --peer ${CMAKE_BINARY_DIR}/logits_peer)
    set_tests_properties(demo_model_greedy PROPERTIES LABELS conformance SKIP_RETURN_CODE 77 TIMEOUT 600
                         ENVIRONMENT "STRATA_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
  endif()
endif()
