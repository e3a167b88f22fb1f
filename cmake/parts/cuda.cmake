# cuda.cmake: the CUDA backend (-DSTRATA_CUDA=ON). Nothing CUDA is configured or built without it.
#   libstrata         gains the CUDA backend (sm_90 code + compute_90 PTX by default): the kernels,
#                     the device forward and the device session; `--device cuda` picks it
#   cuda_op_harness   every CUDA op against the CPU reference (ctest label `cuda`; skips with exit
#                     77 when no GPU is present), --perf for per-op time and matvec GB/s
#   test_cuda_host    the matvec's block arithmetic and dequantizer on the host (labels cuda, cuda_host)
if(NOT STRATA_CUDA)
  return()
endif()

if(STRATA_SANITIZE)
  # the sanitizer's global link flags reach nvcc, which links the CUDA targets and rejects them
  message(FATAL_ERROR "STRATA_CUDA and STRATA_SANITIZE cannot be combined: use separate build directories")
endif()
if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
# CMAKE_CUDA_ARCHITECTURES defaults to "90-real;90-virtual" (the top-level CMakeLists.txt sets it
# before the library's targets exist).
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)

# The CUDA backend is part of libstrata itself: the kernels (src/backend/cuda/*.cu) and the C code
# that drives them (src/**/cuda/*.c: the device forward and the device session), with
# STRATA_HAVE_CUDA defined so that model/device_model_none.c and engine/device_none.c step aside.
file(GLOB STRATA_CUDA_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/backend/cuda/*.cu)
file(GLOB_RECURSE STRATA_CUDA_C_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/*.c)
list(FILTER STRATA_CUDA_C_SOURCES INCLUDE REGEX "/cuda/[^/]*\\.c$")
target_sources(strata_obj PRIVATE ${STRATA_CUDA_SOURCES} ${STRATA_CUDA_C_SOURCES})
# nvcc's options for the .cu files: warnings as errors (host code through the host compiler),
# register spills reported as warnings, hence errors.
set_source_files_properties(${STRATA_CUDA_SOURCES} PROPERTIES COMPILE_OPTIONS
  "--Werror=all-warnings;-Xcompiler=-Wall,-Wextra,-Werror,-Wno-unused-parameter,-Wno-unknown-pragmas;-Xptxas=-warn-spills")
target_compile_definitions(strata_obj PUBLIC STRATA_HAVE_CUDA)
# The host side of the .cu files is C++: libstdc++ beside the CUDA runtime (linked statically) and cuBLAS.
set(STRATA_CUDA_LIBS CUDA::cudart_static CUDA::cublas stdc++)
target_link_libraries(strata_obj PUBLIC ${STRATA_CUDA_LIBS})
target_link_libraries(strata_static PUBLIC ${STRATA_CUDA_LIBS})
target_link_libraries(strata_shared PUBLIC ${STRATA_CUDA_LIBS})
target_compile_definitions(strata_static INTERFACE STRATA_HAVE_CUDA)
# The old name of the backend library, for the targets below.
add_library(strata_cuda INTERFACE)
target_link_libraries(strata_cuda INTERFACE strata_static)

if(STRATA_BUILD_TESTS)
  add_executable(cuda_op_harness ${CMAKE_SOURCE_DIR}/tests/cuda/op_harness.c)
  target_link_libraries(cuda_op_harness PRIVATE strata_cuda strata_static)
  target_include_directories(cuda_op_harness PRIVATE ${CMAKE_SOURCE_DIR}/tests ${CMAKE_SOURCE_DIR}/src)
  set_target_properties(cuda_op_harness PROPERTIES LINKER_LANGUAGE CUDA)
  add_test(NAME cuda_op_harness COMMAND cuda_op_harness)
  # The op table (backend.h) on both backends: the forward's choice of kernels, fused ops included.
  add_executable(cuda_table_harness ${CMAKE_SOURCE_DIR}/tests/cuda/table_harness.c)
  target_link_libraries(cuda_table_harness PRIVATE strata_cuda strata_static)
  target_include_directories(cuda_table_harness PRIVATE ${CMAKE_SOURCE_DIR}/tests ${CMAKE_SOURCE_DIR}/src)
  set_target_properties(cuda_table_harness PROPERTIES LINKER_LANGUAGE CUDA)
  add_test(NAME cuda_table_harness COMMAND cuda_table_harness)
  # The kernels' block arithmetic on the host (no GPU needed): runs in CI too.
  add_executable(test_cuda_host ${CMAKE_SOURCE_DIR}/tests/cuda/test_cuda_host.cu)
  target_link_libraries(test_cuda_host PRIVATE strata_static CUDA::cudart CUDA::cublas)
  target_include_directories(test_cuda_host PRIVATE ${CMAKE_SOURCE_DIR}/tests ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include)
  set_property(TARGET test_cuda_host PROPERTY COMPILE_OPTIONS -D_GNU_SOURCE
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Werror,-Wno-unused-parameter,-Wno-unknown-pragmas>)
  add_test(NAME test_cuda_host COMMAND test_cuda_host)
  set_tests_properties(test_cuda_host PROPERTIES LABELS "cuda;cuda_host" SKIP_RETURN_CODE 77)
  set_tests_properties(cuda_op_harness PROPERTIES LABELS cuda SKIP_RETURN_CODE 77
                       ENVIRONMENT "STRATA_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
endif()

# The whole model on the GPU against the CPU (label cuda; exit 77 = skipped without a GPU):
# every architecture on `strata synth` tiny models in f32, q8_0, q4_k and the low-bit iq4_xs and
# iq3_xxs (drawn as random blocks: it has no quantizer; the other low-bit types are in
# bench/cuda/types_h200.sh), and the device
# workspace through cudaMemGetInfo with its negative control (model_check_leak must fail).
if(STRATA_BUILD_TESTS)
  add_executable(model_check ${CMAKE_SOURCE_DIR}/tests/cuda/model_check.c)
  target_link_libraries(model_check PRIVATE strata_static m)
  add_executable(model_check_leak ${CMAKE_SOURCE_DIR}/tests/cuda/model_check.c ${CMAKE_SOURCE_DIR}/src/base/workspace.c)
  target_compile_definitions(model_check_leak PRIVATE STRATA_WORKSPACE_SKIP_RELEASE)
  target_link_libraries(model_check_leak PRIVATE strata_static m)
  foreach(arch qwen35moe qwen35 qwen3next qwen3moe qwen3)
    foreach(type f32 q8_0 q4_k iq4_xs iq3_xxs)
      add_test(NAME cuda_model_${arch}_${type} COMMAND sh -c "
        d=$(mktemp -d); trap 'rm -rf $d' EXIT
        $<TARGET_FILE:strata> synth $d/m.gguf --arch ${arch} --preset tiny --type ${type} >/dev/null || exit 1
        $<TARGET_FILE:model_check> $d/m.gguf --prompt 100 --decode 16")
      set_tests_properties(cuda_model_${arch}_${type} PROPERTIES LABELS cuda SKIP_RETURN_CODE 77)
    endforeach()
  endforeach()
  # The speculative verify chunk: every kept row bit for bit the decode step's (model_check
  # --verify), across the 256-cell graph bucket.
  foreach(arch qwen35moe qwen3next qwen3)
    add_test(NAME cuda_verify_${arch} COMMAND sh -c "
      d=$(mktemp -d); trap 'rm -rf $d' EXIT
      $<TARGET_FILE:strata> synth $d/m.gguf --arch ${arch} --preset tiny --type q4_k >/dev/null || exit 1
      $<TARGET_FILE:model_check> $d/m.gguf --verify --prompt 100 --decode 220")
    set_tests_properties(cuda_verify_${arch} PROPERTIES LABELS cuda SKIP_RETURN_CODE 77)
  endforeach()
  # The leaking build must fail the growth check and nothing else (tests/negative_control.sh): a
  # broken synth or a failing device session makes the control fail, not pass.
  set(control_model_check "")
  set(control_model_check_leak "sh ${CMAKE_SOURCE_DIR}/tests/negative_control.sh --status 1 --expect '^workspace: FAIL' --forbid '^model_check: |changed free memory' --")
  foreach(t model_check model_check_leak)
    set(control "${control_${t}}")
    add_test(NAME cuda_workspace_${t} COMMAND sh -c "
      d=$(mktemp -d); trap 'rm -rf $d' EXIT
      $<TARGET_FILE:strata> synth $d/m.gguf --arch qwen35moe --preset tiny --type q8_0 >/dev/null || exit 1
      ${control} $<TARGET_FILE:${t}> $d/m.gguf --workspace")
    set_tests_properties(cuda_workspace_${t} PROPERTIES LABELS cuda SKIP_RETURN_CODE 77)
  endforeach()
endif()

# Session state on the GPU (label cuda; exit 77 = skipped without a GPU): cut back to a checkpoint,
# save/load between device and CPU sessions in the one file format, refused states leave the
# device session unchanged (tests/cuda/state_check.c).
if(STRATA_BUILD_TESTS)
  add_executable(state_check ${CMAKE_SOURCE_DIR}/tests/cuda/state_check.c)
  target_link_libraries(state_check PRIVATE strata_static m)
  add_test(NAME cuda_session_state COMMAND sh -c "
    d=$(mktemp -d); trap 'rm -rf $d' EXIT
    $<TARGET_FILE:strata> synth $d/m.gguf --arch qwen35moe --preset tiny --type q8_0 >/dev/null || exit 1
    $<TARGET_FILE:state_check> $d/m.gguf")
  set_tests_properties(cuda_session_state PROPERTIES LABELS cuda SKIP_RETURN_CODE 77)
endif()
