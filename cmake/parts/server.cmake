# server.cmake: `strata serve`: the server library (src/server/, with the web app embedded), its link
# into the `strata` command, and the API/browser tests (label api).
#
# web/*.{html,js,css} become C arrays in ${CMAKE_BINARY_DIR}/web_assets.c at build time (a CMake
# script, no bundler), so the binary serves the app with no files beside it.
pkg_check_modules(MICROHTTPD REQUIRED IMPORTED_TARGET libmicrohttpd)

file(GLOB STRATA_WEB_FILES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/web/*.html ${CMAKE_SOURCE_DIR}/web/*.js ${CMAKE_SOURCE_DIR}/web/*.css)
add_custom_command(
  OUTPUT ${CMAKE_BINARY_DIR}/web_assets.c
  COMMAND ${CMAKE_COMMAND} -DWEB_DIR=${CMAKE_SOURCE_DIR}/web -DOUT=${CMAKE_BINARY_DIR}/web_assets.c
          -P ${CMAKE_SOURCE_DIR}/cmake/parts/server_embed.cmake.in
  DEPENDS ${STRATA_WEB_FILES} ${CMAKE_SOURCE_DIR}/cmake/parts/server_embed.cmake.in
  COMMENT "Embedding web/ into web_assets.c")

file(GLOB STRATA_SERVER_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/server/*.c)
add_library(strata_server STATIC ${STRATA_SERVER_SOURCES} ${CMAKE_BINARY_DIR}/web_assets.c)
target_include_directories(strata_server PUBLIC ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(strata_server PUBLIC strata_static PkgConfig::MICROHTTPD PkgConfig::JANSSON Threads::Threads)
target_link_libraries(strata PRIVATE strata_server)

if(STRATA_BUILD_TESTS)
  # The tests start `strata serve --engine echo` themselves on a free loopback port; the wrapper
  # exits 77 (skipped) when node, the npm packages (tests/api/node_modules) or chromium are absent.
  find_program(STRATA_NODE node)
  foreach(t api web)
    add_test(NAME api_${t}
             COMMAND ${CMAKE_SOURCE_DIR}/tests/api/run.sh ${t} $<TARGET_FILE:strata>
             WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    # api runs the demo model through every SDK test: about 3 minutes on 2 idle cores
    set_tests_properties(api_${t} PROPERTIES LABELS api SKIP_RETURN_CODE 77 TIMEOUT 900
                         ENVIRONMENT "STRATA_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
  endforeach()
endif()

if(STRATA_BUILD_TESTS)
  # The server's text plumbing, in C (reply parsing, JSON checks): a unit test, so the sanitizer
  # run of the unit tests covers it.
  add_executable(server_reply ${CMAKE_SOURCE_DIR}/tests/api/unit_reply.c)
  target_link_libraries(server_reply PRIVATE strata_server)
  target_include_directories(server_reply PRIVATE ${CMAKE_SOURCE_DIR}/tests)
  add_test(NAME server_reply COMMAND server_reply)
  set_tests_properties(server_reply PROPERTIES LABELS unit SKIP_RETURN_CODE 77)
endif()
