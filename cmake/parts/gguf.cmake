# gguf.cmake: the GGUF reader's extra targets.
#   gguf_seeds   writes small valid GGUF files (fuzz seeds, `strata info` fixtures)
#   gguf_info    ctest: `strata info` on good, truncated, empty and missing files
#   fuzz_gguf    libFuzzer target (only with -DSTRATA_FUZZ=ON and clang; run by tools/fuzz.sh)
# The seed tool and the fuzzer are built from the GGUF sources and their few dependencies alone,
# so the fuzz build does not depend on the rest of the library compiling under clang.
set(STRATA_GGUF_SOURCES
  ${CMAKE_SOURCE_DIR}/src/gguf/gguf_read.c
  ${CMAKE_SOURCE_DIR}/src/gguf/gguf_names.c
  ${CMAKE_SOURCE_DIR}/src/gguf/gguf_value.c
  ${CMAKE_SOURCE_DIR}/src/gguf/gguf_write.c
  ${CMAKE_SOURCE_DIR}/src/base/status.c
  ${CMAKE_SOURCE_DIR}/src/base/mmap.c
  ${CMAKE_SOURCE_DIR}/src/quant/types.c)

if(STRATA_BUILD_TESTS OR STRATA_FUZZ)
  add_executable(gguf_seeds ${CMAKE_SOURCE_DIR}/tests/fuzz/gguf_seeds.c ${STRATA_GGUF_SOURCES})
  target_include_directories(gguf_seeds PRIVATE ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR}/src)
endif()

if(STRATA_BUILD_TESTS)
  add_test(NAME gguf_info
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/fuzz/check_info.sh $<TARGET_FILE:strata> $<TARGET_FILE:gguf_seeds>)
  set_tests_properties(gguf_info PROPERTIES LABELS unit)
endif()

if(STRATA_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "STRATA_FUZZ needs clang (libFuzzer): configure with CC=clang")
  endif()
  add_executable(fuzz_gguf ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_gguf.c
                 ${CMAKE_SOURCE_DIR}/src/gguf/gguf_read.c ${CMAKE_SOURCE_DIR}/src/gguf/gguf_names.c
                 ${CMAKE_SOURCE_DIR}/src/gguf/gguf_value.c
                 ${CMAKE_SOURCE_DIR}/src/base/status.c ${CMAKE_SOURCE_DIR}/src/base/mmap.c
                 ${CMAKE_SOURCE_DIR}/src/quant/types.c)
  target_include_directories(fuzz_gguf PRIVATE ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR}/src)
  target_compile_options(fuzz_gguf PRIVATE -g -O1 -fsanitize=fuzzer,address,undefined
                         -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  target_link_options(fuzz_gguf PRIVATE -fsanitize=fuzzer,address,undefined)
endif()
