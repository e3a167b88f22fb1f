# json_grammar.cmake: bench_json_mask, the cost of response_format json_object's constraint on
# Qwen3's 151,936-id vocabulary against llama.cpp's grammar sampler (a benchmark, not a test; it
# needs the npm peer's tokenizer.json, and its libllama for the comparison).
add_executable(bench_json_mask ${CMAKE_SOURCE_DIR}/bench/json/bench_json_mask.c)
target_link_libraries(bench_json_mask PRIVATE strata_static dl)
target_include_directories(bench_json_mask PRIVATE ${CMAKE_SOURCE_DIR}/src)
