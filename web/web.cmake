# The WebAssembly targets (tools/build-web.sh, docs/web.md), included from cli/CMakeLists.txt when EMSCRIPTEN:
#   glassbox_node: glassbox_cli linked for node with the host's files (NODERAWFS), started by glassbox.mjs;
#   glassbox_web:  the same objects linked for a page's Web Worker, over an in-memory file system holding the
#                  embedded toy model, with index.html and worker.js beside it.
# One set of object files for both: the CLI's sources compiled once, as an object library.
set(_gb_web_common -sALLOW_MEMORY_GROWTH=1 -sMAXIMUM_MEMORY=4GB -sTOTAL_STACK=8MB -sWASM_ASYNC_COMPILATION=0)

# node: bin/glassbox-node.js (+ .wasm), a CommonJS script that runs main on load with process.argv; the
# ES module build-web/glassbox.mjs loads it (emscripten makes any .mjs output a module factory instead).
set_target_properties(glassbox_cli PROPERTIES OUTPUT_NAME glassbox-node SUFFIX .js)
# The host's umask (emscripten's starts at 0777: files written under node got mode 0000): web/umask.cpp.
target_sources(glassbox_cli PRIVATE ${CMAKE_SOURCE_DIR}/web/umask.cpp)
target_link_options(glassbox_cli PRIVATE ${_gb_web_common} -sNODERAWFS=1 -sENVIRONMENT=node -sEXIT_RUNTIME=1
  "SHELL:--pre-js ${CMAKE_SOURCE_DIR}/web/node-env.js")
set_property(TARGET glassbox_cli APPEND PROPERTY LINK_DEPENDS ${CMAKE_SOURCE_DIR}/web/node-env.js)
file(WRITE ${CMAKE_BINARY_DIR}/glassbox.mjs
  "// glassbox under node (tools/build-web.sh): node glassbox.mjs ARGS... runs bin/glassbox-node.js, the WebAssembly build.\n"
  "import { createRequire } from 'module';\n"
  "createRequire(import.meta.url)('./bin/glassbox-node.js');\n")
add_custom_target(glassbox_node DEPENDS glassbox_cli default_model)

# The page: bin/glassbox-web.js, an ES module factory (MODULARIZE, EXPORT_ES6) the worker instantiates and
# calls main in, once per run, over MEMFS. The toy model is embedded where session.cpp looks for it
# (executable_path() is /glassbox/bin/glassbox in a page: platform/files_posix.cpp).
add_executable(glassbox_web $<TARGET_OBJECTS:glassbox_cli>)
target_link_libraries(glassbox_web PRIVATE glassbox_session glassbox::glassbox glassbox_traces yaml-cpp CLI11::CLI11)
set_target_properties(glassbox_web PROPERTIES OUTPUT_NAME glassbox-web SUFFIX .mjs)
target_link_options(glassbox_web PRIVATE ${_gb_web_common} -sENVIRONMENT=web,worker -sMODULARIZE=1 -sEXPORT_ES6=1
  -sEXPORTED_RUNTIME_METHODS=callMain,FS -sINVOKE_RUN=0 -sEXIT_RUNTIME=1 -sFORCE_FILESYSTEM=1
  "SHELL:--embed-file ${CMAKE_SOURCE_DIR}/models/toy/toy.bin@/glassbox/${GLASSBOX_DATA_SUBDIR}/models/toy.bin"
  "SHELL:--embed-file ${CMAKE_SOURCE_DIR}/models/toy/toy-tok.bin@/glassbox/${GLASSBOX_DATA_SUBDIR}/models/toy-tok.bin")
set_property(TARGET glassbox_web APPEND PROPERTY LINK_DEPENDS ${CMAKE_SOURCE_DIR}/models/toy/toy.bin ${CMAKE_SOURCE_DIR}/models/toy/toy-tok.bin)
set(_gb_web_src ${CMAKE_SOURCE_DIR}/web)
add_custom_command(TARGET glassbox_web POST_BUILD
  COMMAND ${CMAKE_COMMAND} -E copy $<TARGET_FILE:glassbox_web> $<TARGET_FILE_DIR:glassbox_web>/glassbox-web.wasm ${CMAKE_BINARY_DIR}
  VERBATIM)
# The page's own files, copied whenever one changes (an edit to page.js needs no relink).
set(_gb_web_page index.html worker.js page.js)
set(_gb_web_page_out)
foreach(f ${_gb_web_page})
  add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/${f} COMMAND ${CMAKE_COMMAND} -E copy ${_gb_web_src}/${f} ${CMAKE_BINARY_DIR}/${f}
    DEPENDS ${_gb_web_src}/${f} VERBATIM)
  list(APPEND _gb_web_page_out ${CMAKE_BINARY_DIR}/${f})
endforeach()
add_custom_target(glassbox_web_page ALL DEPENDS ${_gb_web_page_out})
add_dependencies(glassbox_web glassbox_web_page)

# The kernel tests under node (tests/web/test_kernels_node.cpp: tests/test_kernels.cpp with Boost.Test's
# header-only variant): bin/test-kernels.js, run by tests/web/test-web-node.sh. Built with glassbox_node.
add_executable(glassbox_test_kernels ${CMAKE_SOURCE_DIR}/tests/web/test_kernels_node.cpp ${CMAKE_SOURCE_DIR}/tests/support.cpp)
target_link_libraries(glassbox_test_kernels PRIVATE glassbox::glassbox glassbox_traces nlohmann_json::nlohmann_json xsimd)
target_include_directories(glassbox_test_kernels PRIVATE ${CMAKE_SOURCE_DIR}/tests)
target_compile_definitions(glassbox_test_kernels PRIVATE
  GLASSBOX_SOURCE_DIR="${PROJECT_SOURCE_DIR}" GLASSBOX_BINARY_DIR="${PROJECT_BINARY_DIR}" GLASSBOX_BIN=""
  GLASSBOX_TEST_PLUGIN_DIR="" GLASSBOX_NPM_DIR="")
set_target_properties(glassbox_test_kernels PROPERTIES OUTPUT_NAME test-kernels SUFFIX .js)
target_link_options(glassbox_test_kernels PRIVATE ${_gb_web_common} -sNODERAWFS=1 -sENVIRONMENT=node -sEXIT_RUNTIME=1
  "SHELL:--pre-js ${CMAKE_SOURCE_DIR}/web/node-env.js")
add_dependencies(glassbox_node glassbox_test_kernels)
