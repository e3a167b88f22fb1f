# engine.cmake: the workspace's negative control. test_workspace_leak is test_workspace.c linked
# with a workspace built to skip the release (STRATA_WORKSPACE_SKIP_RELEASE); the growth test must
# catch that leak, so ctest expects this test to fail.
if(STRATA_BUILD_TESTS)
  add_executable(test_workspace_leak ${CMAKE_SOURCE_DIR}/tests/unit/test_workspace.c
                                     ${CMAKE_SOURCE_DIR}/src/engine/workspace.c)
  target_compile_definitions(test_workspace_leak PRIVATE STRATA_WORKSPACE_SKIP_RELEASE)
  target_link_libraries(test_workspace_leak PRIVATE strata_static)
  target_include_directories(test_workspace_leak PRIVATE ${CMAKE_SOURCE_DIR}/tests)
  add_test(NAME test_workspace_leak COMMAND test_workspace_leak WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
  set_tests_properties(test_workspace_leak PROPERTIES LABELS unit WILL_FAIL TRUE SKIP_RETURN_CODE 77
                       ENVIRONMENT "STRATA_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
endif()
