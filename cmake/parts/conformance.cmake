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
#   conformance_quantize_<T>  a tiny qwen35moe written by llama.cpp's llama-quantize in type or mix T
#                         with an importance matrix (tests/conformance/quantize_peer.sh), for every
#                         T of STRATA_PEER_QUANT_TYPES; skipped without llama-quantize/llama-imatrix.
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

  # The llama-quantize types and mixes whose files give llama.cpp's logits here. The grid i-quant
  # mixes (IQ1_S IQ1_M IQ2_XXS IQ2_XS IQ2_S IQ2_M IQ3_XXS IQ3_XS IQ3_S IQ3_M) join this list when
  # their types are computable. Left out: Q4_1, 98% top-1 (KL 7e-5) on an AVX-512 machine: from
  # position 12 on both sides differ by ~5e-3 after one activation rounds the other way (the
  # bit-level drift that issue 12 describes for Q6_K, not a wrong kernel).
  set(STRATA_PEER_QUANT_TYPES
      F16 BF16 Q8_0 Q4_0 Q5_0 Q5_1 Q2_K Q2_K_S Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K
      IQ4_NL IQ4_XS TQ1_0 TQ2_0 MXFP4_MOE Q1_0 Q2_0
      IQ1_S IQ1_M IQ2_XXS IQ2_XS IQ2_S IQ2_M IQ3_XXS IQ3_XS IQ3_S IQ3_M)
  foreach(type ${STRATA_PEER_QUANT_TYPES})
    string(TOLOWER ${type} lower)
    set(name conformance_quantize_${lower})
    add_test(NAME ${name}
             COMMAND bash ${CMAKE_SOURCE_DIR}/tests/conformance/conformance.sh --arch qwen35moe --source quantize
                     --type ${type} --bin ${CMAKE_BINARY_DIR} --work ${CMAKE_BINARY_DIR}/conformance/${name})
    set_tests_properties(${name} PROPERTIES LABELS "conformance;peer" SKIP_RETURN_CODE 77 TIMEOUT 300
                         ENVIRONMENT "STRATA_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
  endforeach()

  # Issue 12's Q6_K gap, closed: on the same instruction set both engines compute the same bits
  # in the products (2.7e-7 measured; it was 4.8e-3 at AVX2 and 1.9e-3 at AVX-512). The prompt
  # attention's tiles (chunks of 32 rows or more, ops_attn.c) add in another order than ggml's, which
  # leaves 2e-5 at AVX2, so the limit is 1e-4: the gap's rounding flips cost 1e-3 and more. One test
  # at this CPU's best level against the peer's best build for it, one with both held at AVX2.
  # Types whose kernels still add in another order than ggml's (Q2_K..Q5_K, and at AVX-512 the
  # 32-element types too) drift past 1e-5 after a rounding flip, within the quantized limits.
  # At AVX2 one position of the 100 is left out of the 1e-4 (top-1 and KL still count it): on an
  # AVX-512 host, where the peer's AVX2 build is libggml-cpu-haswell.so, one activation of this
  # model (layer 3's attention output, position 13) lands exactly on a Q8_K rounding boundary in
  # that build and a few ulp below it in ours and in ggml's AVX-512 builds, which moves position 13
  # alone by 1.2e-3. ggml computes that attention in three ops whose orders our online softmax does
  # not follow (ops_attn_avx2.c); every other position agrees to 2.2e-7.
  foreach(level native avx2)
    set(name conformance_quantize_q6_k_exact_${level})
    set(env "STRATA_SOURCE_DIR=${CMAKE_SOURCE_DIR};STRATA_CONF_MAX_REL=1e-4")
    if(level STREQUAL "avx2")
      set(env "${env};STRATA_PEER_VARIANT=haswell;STRATA_CPU_LEVEL=1;STRATA_CONF_MAX_REL_SKIP=1")
    endif()
    add_test(NAME ${name}
             COMMAND bash ${CMAKE_SOURCE_DIR}/tests/conformance/conformance.sh --arch qwen35moe --source quantize
                     --type Q6_K --bin ${CMAKE_BINARY_DIR} --work ${CMAKE_BINARY_DIR}/conformance/${name})
    set_tests_properties(${name} PROPERTIES LABELS "conformance;peer" SKIP_RETURN_CODE 77 TIMEOUT 300
                         ENVIRONMENT "${env}")
  endforeach()

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
