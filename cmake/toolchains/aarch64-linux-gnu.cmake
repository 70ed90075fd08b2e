# 64-bit ARM Linux (Debian's aarch64-linux-gnu cross gcc), the target of the
# qemu-aarch64, raspberry-pi-4 and jetson-orin boards.
#
#   cmake -S . -B build/aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake
#
# Add -DCMAKE_EXE_LINKER_FLAGS=-static for executables that run on any board
# without its libc. ctest runs the tests under qemu-aarch64. Pick a CPU with
# -DCMAKE_C_FLAGS=-mcpu=cortex-a72 (the boards' files name theirs).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(RXE_CROSS_TRIPLE aarch64-linux-gnu)

set(CMAKE_C_COMPILER ${RXE_CROSS_TRIPLE}-gcc)
set(CMAKE_FIND_ROOT_PATH /usr/${RXE_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/${RXE_CROSS_TRIPLE})
