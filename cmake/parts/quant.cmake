# quant.cmake: the reference conversions must round every product and sum on its own, as ggml's
# do; a fused multiply-add (GCC contracts by default in GNU modes, and with -march that has FMA)
# changes rounding and breaks bit-exactness with the peer (test_quant_ggml). Forbid contraction
# in these files whatever the flags.
set_property(SOURCE
  ${CMAKE_SOURCE_DIR}/src/quant/fp16.c
  ${CMAKE_SOURCE_DIR}/src/quant/ref_iq.c
  ${CMAKE_SOURCE_DIR}/src/quant/quant.c
  ${CMAKE_SOURCE_DIR}/src/quant/ref_legacy.c
  ${CMAKE_SOURCE_DIR}/src/quant/ref_k.c
  ${CMAKE_SOURCE_DIR}/src/quant/ref_iq4.c
  ${CMAKE_SOURCE_DIR}/src/quant/ref_lowbit.c
  ${CMAKE_SOURCE_DIR}/src/quant/ref_fp4.c
  APPEND PROPERTY COMPILE_OPTIONS -ffp-contract=off)

# test_dot again with AVX512_BF16 turned off: BF16's AVX-512 kernel is then the widening one of
# dot_avx512.c (vdpbf16ps otherwise), which a CPU with AVX-512 but not BF16 runs.
if(STRATA_BUILD_TESTS)
  add_test(NAME test_dot_no_avx512bf16 COMMAND test_dot WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
  set_tests_properties(test_dot_no_avx512bf16 PROPERTIES LABELS unit SKIP_RETURN_CODE 77
                       ENVIRONMENT "STRATA_SOURCE_DIR=${CMAKE_SOURCE_DIR};STRATA_CPU_OFF=avx512bf16")
endif()
