# cuda.cmake: the CUDA backend (-DSTRATA_CUDA=ON). Nothing CUDA is configured or built without it.
#   strata_cuda       static library of src/backend/cuda/*.cu (sm_90 code + compute_90 PTX by default)
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
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  # Hopper machine code, plus PTX the driver compiles for newer GPUs
  set(CMAKE_CUDA_ARCHITECTURES "90-real;90-virtual")
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)

file(GLOB STRATA_CUDA_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/backend/cuda/*.cu)
add_library(strata_cuda STATIC ${STRATA_CUDA_SOURCES})
# The directory's C flags (-Wall ... -fsanitize) are not nvcc options: replace them for this target.
set_property(TARGET strata_cuda PROPERTY COMPILE_OPTIONS
  -D_GNU_SOURCE
  $<$<COMPILE_LANGUAGE:CUDA>:--Werror=all-warnings>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Werror,-Wno-unused-parameter,-Wno-unknown-pragmas>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=-warn-spills>)
target_include_directories(strata_cuda PUBLIC ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(strata_cuda PUBLIC strata_static CUDA::cudart CUDA::cublas)
set_target_properties(strata_cuda PROPERTIES POSITION_INDEPENDENT_CODE ON)

if(STRATA_BUILD_TESTS)
  add_executable(cuda_op_harness ${CMAKE_SOURCE_DIR}/tests/cuda/op_harness.c)
  target_link_libraries(cuda_op_harness PRIVATE strata_cuda strata_static)
  target_include_directories(cuda_op_harness PRIVATE ${CMAKE_SOURCE_DIR}/tests ${CMAKE_SOURCE_DIR}/src)
  set_target_properties(cuda_op_harness PROPERTIES LINKER_LANGUAGE CUDA)
  add_test(NAME cuda_op_harness COMMAND cuda_op_harness)
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
