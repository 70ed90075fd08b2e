# ctest's check of the example module's RPC server:
#   cmake -DSERVER=rxe_fuzz_server -DFRAMES=example_list.frames [-DEMULATOR=qemu-aarch64] -P check_server.cmake
# sends the frames (LIST, SHUTDOWN) on the server's stdin (under the cross
# build's emulator, if any); the server must exit 0 after replying with both
# functions of the module.
execute_process(COMMAND ${EMULATOR} "${SERVER}" INPUT_FILE "${FRAMES}" OUTPUT_VARIABLE replies RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the server exited with ${rc}")
endif()
foreach(name main count)
  string(FIND "${replies}" "${name}" at)
  if(at LESS 0)
    message(FATAL_ERROR "the LIST reply does not name function ${name}")
  endif()
endforeach()
message(STATUS "RXE_SERVER_OK")
