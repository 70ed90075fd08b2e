# rxe_add_model: a compiled model's targets, linked as relax_edge/toolchain.py
# links them (Packager: the libraries, the runner and the RPC server).
#
#   rxe_add_model(NAME
#                 SOURCES model.c model_weights.S | model_host.o model_kernels.o model_weights.S
#                 [PROFILED_SOURCES model_host_profiled.o model_kernels.o model_weights.S]
#                 [MODULE symbol])
#
# creates
#   NAME          static library of the model (links relax_edge::runtime)
#   NAME_runner   the runner of runtime_c/tools/runner.c (tensor files in and out)
#   NAME_server   hosted targets only: the RPC server (rpc/protocol.c,
#                 rpc/server_posix.c) over the model with its per-kernel
#                 profiler: the C sources compiled again with RXE_PROFILE, or
#                 PROFILED_SOURCES (the LLVM build's PREFIX_host_profiled.o)
#
# NAME is the model's prefix (rxe.build(..., name=NAME)); MODULE is the
# exported rxe_module_t, NAME_module unless given. C sources are compiled as
# ISO C99 with -Wall -Wextra -fno-math-errno, position-independent on hosted
# targets; a weights file (.S) is assembled with its folder on the
# assembler's include path (its .incbin of PREFIX_weights.bin), which needs
# the ASM language: project(... LANGUAGES C ASM). Objects (.o) are linked
# as they are. The board's own flags (-O, -march, -mcpu) come from the
# toolchain file or CMAKE_C_FLAGS.
#
# Reads RELAX_EDGE_RUNTIME_SOURCE_DIR: the folder holding tools/runner.c and
# rpc/*.c (the checkout's runtime_c/, or share/relax_edge/runtime_c/ of an
# install; relax_edge-config.cmake sets it).
include_guard(GLOBAL)

# The options of a model library `target`, as relax_edge/toolchain.py's Toolchain.
function(_rxe_model_options target)
  set(hosted TRUE)
  if(CMAKE_SYSTEM_NAME STREQUAL "Generic")
    set(hosted FALSE)
  endif()
  set_target_properties(${target} PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF
                                             POSITION_INDEPENDENT_CODE ${hosted})
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:C>:-Wall -Wextra -fno-math-errno>)
  target_link_libraries(${target} PUBLIC relax_edge::runtime)
endfunction()

# Each weights file (.S) of the sources: its folder on the assembler's
# include path, and a rebuild when its PREFIX_weights.bin changes.
function(_rxe_weights_properties)
  foreach(src IN LISTS ARGN)
    if(NOT src MATCHES "\\.S$")
      continue()
    endif()
    if(NOT CMAKE_ASM_COMPILER_LOADED)
      message(FATAL_ERROR "rxe_add_model: ${src} is assembly; enable it with project(... LANGUAGES C ASM)")
    endif()
    get_filename_component(src_path "${src}" ABSOLUTE)
    get_filename_component(src_dir "${src_path}" DIRECTORY)
    string(REGEX REPLACE "\\.S$" ".bin" blob "${src_path}")
    set_property(SOURCE "${src}" APPEND PROPERTY COMPILE_OPTIONS "-Wa,-I${src_dir}")
    set_property(SOURCE "${src}" APPEND PROPERTY OBJECT_DEPENDS "${blob}")
  endforeach()
endfunction()

# An executable of the runtime source `main_source` (under
# RELAX_EDGE_RUNTIME_SOURCE_DIR, then ARGN) on the module `module`.
function(_rxe_model_executable exe main_source module)
  add_executable(${exe} "${RELAX_EDGE_RUNTIME_SOURCE_DIR}/${main_source}" ${ARGN})
  set_target_properties(${exe} PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
  target_compile_options(${exe} PRIVATE -Wall -Wextra)
  target_compile_definitions(${exe} PRIVATE RXE_MODULE=${module})
endfunction()

function(rxe_add_model name)
  cmake_parse_arguments(PARSE_ARGV 1 RXE "" "MODULE" "SOURCES;PROFILED_SOURCES")
  if(NOT RXE_SOURCES)
    message(FATAL_ERROR "rxe_add_model(${name}): no SOURCES")
  endif()
  if(NOT RELAX_EDGE_RUNTIME_SOURCE_DIR)
    message(FATAL_ERROR "rxe_add_model(${name}): RELAX_EDGE_RUNTIME_SOURCE_DIR is not set (find_package(relax_edge))")
  endif()
  if(NOT RXE_MODULE)
    set(RXE_MODULE ${name}_module)
  endif()
  _rxe_weights_properties(${RXE_SOURCES} ${RXE_PROFILED_SOURCES})

  add_library(${name} STATIC ${RXE_SOURCES})
  _rxe_model_options(${name})

  _rxe_model_executable(${name}_runner tools/runner.c ${RXE_MODULE})
  if(CMAKE_SYSTEM_NAME STREQUAL "Generic")
    # bare metal: the command line and the files through semihosting; no server
    target_compile_definitions(${name}_runner PRIVATE RXE_SEMIHOST)
    target_link_libraries(${name}_runner PRIVATE ${name})
    return()
  endif()
  target_link_libraries(${name}_runner PRIVATE ${name} m)

  if(RXE_PROFILED_SOURCES)
    add_library(${name}_profiled STATIC ${RXE_PROFILED_SOURCES})
  else()
    add_library(${name}_profiled STATIC ${RXE_SOURCES})
    target_compile_definitions(${name}_profiled PRIVATE RXE_PROFILE)
  endif()
  _rxe_model_options(${name}_profiled)
  _rxe_model_executable(${name}_server rpc/server_posix.c ${RXE_MODULE}
                        "${RELAX_EDGE_RUNTIME_SOURCE_DIR}/rpc/protocol.c")
  target_link_libraries(${name}_server PRIVATE ${name}_profiled m)
endfunction()
