# bench.cmake: benchmarks (not tests). bench_matvec: quantized matrix-vector products against the
# machine's read bandwidth and the peer's ggml kernels; bench/matvec/run.sh runs it and writes
# bench/results/<date>-matvec-cpu.md.
add_executable(bench_matvec ${CMAKE_SOURCE_DIR}/bench/matvec/bench_matvec.c)
target_link_libraries(bench_matvec PRIVATE strata_static dl)
target_include_directories(bench_matvec PRIVATE ${CMAKE_SOURCE_DIR}/src)
