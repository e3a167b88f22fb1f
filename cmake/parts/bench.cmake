# bench.cmake: benchmarks (not tests). bench_matvec: quantized matrix-vector products against the
# machine's read bandwidth and the peer's ggml kernels; bench/matvec/run.sh runs it and writes
# bench/results/<date>-matvec-cpu.md.
add_executable(bench_matvec ${CMAKE_SOURCE_DIR}/bench/matvec/bench_matvec.c)
target_link_libraries(bench_matvec PRIVATE strata_static dl)
target_include_directories(bench_matvec PRIVATE ${CMAKE_SOURCE_DIR}/src)
# bench_slots: the batched decode step of parallel slots against one session (bench/slots/).
add_executable(bench_slots ${CMAKE_SOURCE_DIR}/bench/slots/bench_slots.c)
target_link_libraries(bench_slots PRIVATE strata_static)
target_include_directories(bench_slots PRIVATE ${CMAKE_SOURCE_DIR}/src)
# bench_verify: the verify chunk of 1..N rows and the MTP head's steps against a one-row decode
# (bench/spec/; what speculative decoding's step costs, engine/spec.c).
add_executable(bench_verify ${CMAKE_SOURCE_DIR}/bench/spec/bench_verify.c)
target_link_libraries(bench_verify PRIVATE strata_static)
target_include_directories(bench_verify PRIVATE ${CMAKE_SOURCE_DIR}/src)
# bench_rows: one type's one-row kernel against its tile kernel at 1..8 activation rows, from cache.
add_executable(bench_rows ${CMAKE_SOURCE_DIR}/bench/matvec/bench_rows.c)
target_link_libraries(bench_rows PRIVATE strata_static)
target_include_directories(bench_rows PRIVATE ${CMAKE_SOURCE_DIR}/src)
