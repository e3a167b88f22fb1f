# ops.cmake: bench_ops, the non-matmul CPU ops (GDN step vs chunked, attention prefill/decode,
# norms, conv, gates) per variant and thread count at the target model's shapes. Not a test.
add_executable(bench_ops ${CMAKE_SOURCE_DIR}/bench/ops/bench_ops.c)
target_link_libraries(bench_ops PRIVATE strata_static)
target_include_directories(bench_ops PRIVATE ${CMAKE_SOURCE_DIR}/src)
