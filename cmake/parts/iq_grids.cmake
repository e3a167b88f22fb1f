# iq_grids.cmake: tools/iq_grids_gen, which wrote src/quant/iq_grids_data.c from the peer's
# libggml (see its header); rerun by hand, it is not part of the build:
#   build/iq_grids_gen .peer/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so > src/quant/iq_grids_data.c
add_executable(iq_grids_gen EXCLUDE_FROM_ALL ${CMAKE_SOURCE_DIR}/tools/iq_grids_gen.c)
target_link_libraries(iq_grids_gen PRIVATE dl)
