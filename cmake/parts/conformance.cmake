# conformance.cmake: Strata against llama.cpp, logits for logits (label `conformance`), and the
# synth sources the synth unit test needs.
#
#   conformance_compare   tests/conformance/compare.c: token lists and the logits judge
#   logits_peer           tests/conformance/logits_peer.c: the peer's logits through its libllama;
#                         built when llama.h is found (the peer's source: .peer/llama.cpp from
#                         tools/peer-build.sh, or STRATA_LLAMA_SRC)
#   conformance_<arch>_<model>   for each architecture: the model test-llama-archs writes, and
#                         `strata synth` tiny models in f32, q8_0 and q4_k (tests/conformance/
#                         conformance.sh says what is compared and how); skipped while a piece
#                         is missing (peer library, logits_peer, `strata eval`, test-llama-archs).
#                         qwen4exp also: conformance_qwen4exp_synth_f32_ratio4, the tiny model
#                         with the real model's QSA ratio of 4, which divides its budget of 16
#                         (the default tiny ratio of 3 does not).
if(STRATA_BUILD_TESTS)
  if(TARGET test_synth)
    target_sources(test_synth PRIVATE ${CMAKE_SOURCE_DIR}/src/cli/synth_plan.c
                   ${CMAKE_SOURCE_DIR}/src/cli/synth_vocab.c ${CMAKE_SOURCE_DIR}/src/cli/synth_write.c)
  endif()

  add_executable(conformance_compare ${CMAKE_SOURCE_DIR}/tests/conformance/compare.c)
  target_link_libraries(conformance_compare PRIVATE m)

  find_path(STRATA_LLAMA_INCLUDE llama.h NO_DEFAULT_PATH
            PATHS $ENV{STRATA_LLAMA_SRC}/include ${CMAKE_SOURCE_DIR}/.peer/llama.cpp/include)
  find_path(STRATA_GGML_INCLUDE ggml.h NO_DEFAULT_PATH
            PATHS $ENV{STRATA_LLAMA_SRC}/ggml/include ${CMAKE_SOURCE_DIR}/.peer/llama.cpp/ggml/include)
  if(STRATA_LLAMA_INCLUDE AND STRATA_GGML_INCLUDE)
    add_executable(logits_peer ${CMAKE_SOURCE_DIR}/tests/conformance/logits_peer.c)
    target_include_directories(logits_peer PRIVATE ${STRATA_LLAMA_INCLUDE} ${STRATA_GGML_INCLUDE})
    target_link_libraries(logits_peer PRIVATE dl)
  else()
    message(WARNING "conformance: llama.h not found (run tools/peer-build.sh): the conformance tests against llama.cpp will SKIP (and fail under CI=true)")
  endif()

  foreach(arch qwen35moe qwen35 qwen3next qwen3moe qwen3 qwen4exp)
    set(runs "llama-archs:f32" "synth:f32" "synth:q8_0" "synth:q4_k")
    foreach(run ${runs})
      string(REPLACE ":" ";" parts ${run})
      list(GET parts 0 source)
      list(GET parts 1 type)
      if(source STREQUAL "llama-archs")
        set(name conformance_${arch}_llama_archs)
      else()
        set(name conformance_${arch}_synth_${type})
      endif()
      add_test(NAME ${name}
               COMMAND bash ${CMAKE_SOURCE_DIR}/tests/conformance/conformance.sh --arch ${arch} --source ${source}
                       --type ${type} --bin ${CMAKE_BINARY_DIR} --work ${CMAKE_BINARY_DIR}/conformance/${name})
      set_tests_properties(${name} PROPERTIES LABELS conformance SKIP_RETURN_CODE 77 TIMEOUT 300
                           ENVIRONMENT "STRATA_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
    endforeach()
  endforeach()

  set(name conformance_qwen4exp_synth_f32_ratio4)
  add_test(NAME ${name}
           COMMAND bash ${CMAKE_SOURCE_DIR}/tests/conformance/conformance.sh --arch qwen4exp --source synth --type f32
                   --synth-args "--qsa-ratio 4" --bin ${CMAKE_BINARY_DIR} --work ${CMAKE_BINARY_DIR}/conformance/${name})
  set_tests_properties(${name} PROPERTIES LABELS conformance SKIP_RETURN_CODE 77 TIMEOUT 300
                       ENVIRONMENT "STRATA_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
endif()
