# ctest driver (cmake -P): install glassbox into a temporary prefix, build the out-of-tree sampler
# example (samplers/examples/epsilon) against it with find_package(glassbox), and run the
# installed `glassbox` with --plugin-path pointing at the example's build folder.
#   -DBUILD_DIR=<glassbox build>  -DSOURCE_DIR=<glassbox source>  -DWORK_DIR=<scratch>  [-DSHARED_DIR=<../shared>]
foreach(v BUILD_DIR SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "test_example.cmake: -D${v}=... is required")
  endif()
endforeach()

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "failed (${rc}): ${cmd}\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
  set(err "${err}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
set(build ${WORK_DIR}/epsilon-build)

# 1. the installed package
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
# 2. the plugin, configured and built as a separate project
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/samplers/examples/epsilon -B ${build}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${build})
if(NOT EXISTS ${build}/gb_epsilon.so)
  message(FATAL_ERROR "the example did not produce gb_epsilon.so")
endif()
set(gb ${prefix}/bin/glassbox)

# 3. listed, and usable without a model: epsilon 0.12 keeps sunny, cloudy, warm
run(${gb} plugins --plugin-path ${build})
if(NOT out MATCHES "sampler epsilon")
  message(FATAL_ERROR "'glassbox plugins' does not list epsilon:\n${out}")
endif()
run(${gb} explain --plugin-path ${build} --dist "sunny=.45,cloudy=.25,warm=.15,rainy=.10,cold=.05"
    --sampler epsilon:0.12 --json)
string(JSON kept GET "${out}" stages 0 kept)
string(JSON name GET "${out}" stages 0 name)
if(NOT name STREQUAL "epsilon" OR NOT kept EQUAL 3)
  message(FATAL_ERROR "explain with epsilon:0.12: stage '${name}' kept ${kept}, expected epsilon keeping 3:\n${out}")
endif()
message(STATUS "explain: epsilon:0.12 keeps ${kept} of 5")

# 3b. the installed binary finds its embedded default model from any working directory
if(EXISTS ${SOURCE_DIR}/models/toy/toy.bin)
  execute_process(COMMAND ${gb} run --prompt "The weather today is" --sampler greedy --max-tokens 2
                  WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out STREQUAL " sunny.\n")  # stdout ends its line
    message(FATAL_ERROR "installed glassbox with its default model: rc ${rc}, output '${out}' (expected ' sunny.' and a newline)\n${err}")
  endif()
  message(STATUS "installed default model: '${out}'")
endif()

# 4. in a real run on stories260K
if(DEFINED ENV{GLASSBOX_TEST_DATA})
  set(SHARED_DIR $ENV{GLASSBOX_TEST_DATA})
endif()
if(NOT SHARED_DIR OR NOT EXISTS ${SHARED_DIR}/models/stories260K.bin)
  message(STATUS "SKIPPED: the run on stories260K needs ../shared (or GLASSBOX_TEST_DATA); install, build and explain passed")
  return()
endif()
run(${gb} run --plugin-path ${build} --model ${SHARED_DIR}/models/stories260K.bin
    --tokenizer ${SHARED_DIR}/models/tok512.bin --prompt "Once upon a time" --max-tokens 30
    --sampler epsilon:0.02,temperature:0.8 --seed 7 --trace ${WORK_DIR}/trace.jsonl)
string(STRIP "${out}" text)
if(text STREQUAL "")
  message(FATAL_ERROR "glassbox run with the epsilon plugin printed no text:\n${err}")
endif()
file(STRINGS ${WORK_DIR}/trace.jsonl header LIMIT_COUNT 1)
string(JSON s0 GET "${header}" plugins sampler 0 name)
if(NOT s0 STREQUAL "epsilon")
  message(FATAL_ERROR "the trace header's first sampler stage is '${s0}', not epsilon")
endif()
message(STATUS "run with epsilon:0.02,temperature:0.8: ${text}")
