# 64-bit RISC-V Linux, rv64gc with the lp64d ABI (Debian's riscv64-linux-gnu
# cross gcc), the target of the qemu-riscv64 board; flags from
# boards/qemu-riscv64.yaml.
#
#   cmake -S . -B build/riscv64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/riscv64-linux-gnu.cmake
#
# Add -DCMAKE_EXE_LINKER_FLAGS=-static for self-contained executables.
# ctest runs the tests under qemu-riscv64.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR riscv64)
set(RXE_CROSS_TRIPLE riscv64-linux-gnu)

set(CMAKE_C_COMPILER ${RXE_CROSS_TRIPLE}-gcc)
# The architecture and float ABI go on every compile and link (a
# -DCMAKE_C_FLAGS of your own adds to them instead of replacing them).
set(RXE_CPU_FLAGS -march=rv64gc -mabi=lp64d)
add_compile_options(${RXE_CPU_FLAGS})
add_link_options(${RXE_CPU_FLAGS})
set(CMAKE_FIND_ROOT_PATH /usr/${RXE_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-riscv64 -L /usr/${RXE_CROSS_TRIPLE})
