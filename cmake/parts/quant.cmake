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
