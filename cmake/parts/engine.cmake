# engine.cmake: the workspace's negative control. test_workspace_leak is test_workspace.c linked
# with a workspace built to skip the release (STRATA_WORKSPACE_SKIP_RELEASE); the growth test must
# catch that leak, and only that: tests/negative_control.sh passes when it exits 1 with the heap
# accounting's checks failing and no other check.
if(STRATA_BUILD_TESTS)
  add_executable(test_workspace_leak ${CMAKE_SOURCE_DIR}/tests/unit/test_workspace.c
                                     ${CMAKE_SOURCE_DIR}/src/base/workspace.c)
  target_compile_definitions(test_workspace_leak PRIVATE STRATA_WORKSPACE_SKIP_RELEASE)
  target_link_libraries(test_workspace_leak PRIVATE strata_static)
  target_include_directories(test_workspace_leak PRIVATE ${CMAKE_SOURCE_DIR}/tests)
  add_test(NAME test_workspace_leak
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/negative_control.sh --status 1 --expect "mmapped bytes above baseline"
                   --only "bytes (in use )?above baseline" -- $<TARGET_FILE:test_workspace_leak>
           WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
  set_tests_properties(test_workspace_leak PROPERTIES LABELS unit SKIP_RETURN_CODE 77
                       ENVIRONMENT "STRATA_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
endif()

# The exact CLI forms outside checks rely on: `strata eval` writes n_tokens x n_vocab f32 logits,
# refuses an out-of-range token id with exit status 1; `strata run` and `strata bench` run end to
# end on a tiny synthetic model with its built-in tokenizer.
if(STRATA_BUILD_TESTS)
  add_test(NAME cli_engine_commands COMMAND sh -c "
    set -e
    d=$(mktemp -d)
    trap 'rm -rf $d' EXIT
    $<TARGET_FILE:strata> synth $d/m.gguf --arch qwen35moe --preset tiny --type f32 -t 1 >/dev/null
    $<TARGET_FILE:strata> eval -m $d/m.gguf --tokens 1,2,3,4,5 --prefill 2 --logits $d/l.bin -t 1
    v=$(( $(stat -c %s $d/l.bin) / 20 ))
    test $v -gt 0
    test $(stat -c %s $d/l.bin) -eq $((5 * v * 4))
    if $<TARGET_FILE:strata> eval -m $d/m.gguf --tokens 1,$v --logits $d/x.bin -t 1 2>/dev/null; then exit 1; fi
    $<TARGET_FILE:strata> eval -m $d/m.gguf --tokens 1,$v --logits $d/x.bin -t 1 2>/dev/null || test $? -eq 1
    $<TARGET_FILE:strata> run -m $d/m.gguf -p 'Hello' -n 4 --seed 1 -t 1 >/dev/null
    $<TARGET_FILE:strata> bench -m $d/m.gguf -p 8 -n 4 -r 1 -t 1 --json | grep -q '\"tg\"'
    for c in run eval bench chat; do $<TARGET_FILE:strata> $c --help >/dev/null; done
  ")
  set_tests_properties(cli_engine_commands PROPERTIES LABELS unit)
endif()

# Parallel slots: the rows of several sessions in one forward against each session fed alone, bit
# for bit (tests/cuda/slots_check.c), with --cpu on the CPU's forward of several sequences.
if(STRATA_BUILD_TESTS)
  add_executable(slots_check ${CMAKE_SOURCE_DIR}/tests/cuda/slots_check.c)
  target_link_libraries(slots_check PRIVATE strata_static m)
  target_include_directories(slots_check PRIVATE ${CMAKE_SOURCE_DIR}/tests/cuda)
  foreach(arch qwen35moe qwen3)
    add_test(NAME slots_cpu_${arch} COMMAND sh -c "
      d=$(mktemp -d); trap 'rm -rf $d' EXIT
      $<TARGET_FILE:strata> synth $d/m.gguf --arch ${arch} --preset tiny --type q8_0 >/dev/null || exit 1
      $<TARGET_FILE:slots_check> $d/m.gguf --cpu --prompt 40 --decode 16")
    set_tests_properties(slots_cpu_${arch} PROPERTIES LABELS engine)
  endforeach()
endif()
