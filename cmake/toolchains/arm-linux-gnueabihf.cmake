# 32-bit ARMv7-A Linux, hard float with NEON (Debian's arm-linux-gnueabihf
# cross gcc), the target of the qemu-armv7 board; flags from
# boards/qemu-armv7.yaml.
#
#   cmake -S . -B build/armv7 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/arm-linux-gnueabihf.cmake
#
# Add -DCMAKE_EXE_LINKER_FLAGS=-static for self-contained executables.
# ctest runs the tests under qemu-arm.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(RXE_CROSS_TRIPLE arm-linux-gnueabihf)

set(CMAKE_C_COMPILER ${RXE_CROSS_TRIPLE}-gcc)
# The architecture and float ABI go on every compile and link (a
# -DCMAKE_C_FLAGS of your own adds to them instead of replacing them).
set(RXE_CPU_FLAGS -march=armv7-a -mfpu=neon -mfloat-abi=hard)
add_compile_options(${RXE_CPU_FLAGS})
add_link_options(${RXE_CPU_FLAGS})
set(CMAKE_FIND_ROOT_PATH /usr/${RXE_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-arm -L /usr/${RXE_CROSS_TRIPLE})
