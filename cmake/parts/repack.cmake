# repack.cmake: bench_repack_ab (bench/matvec/repack_ab.c), Q4_K decode products in the file's
# layout against the load-time repacked one (src/quant/repack.h), interleaved in one process.
add_executable(bench_repack_ab ${CMAKE_SOURCE_DIR}/bench/matvec/repack_ab.c)
target_link_libraries(bench_repack_ab PRIVATE strata_static)
target_include_directories(bench_repack_ab PRIVATE ${CMAKE_SOURCE_DIR}/src)
