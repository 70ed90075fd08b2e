# Cortex-M4F microcontroller, no OS: arm-none-eabi-gcc with picolibc, hard
# float (fpv4-sp-d16), the target of the qemu-cortex-m4 board (MPS2 AN386);
# flags from boards/qemu-cortex-m4.yaml. The runtime uses its own math
# (RXE_NO_LIBM).
#
#   cmake -S . -B build/m4 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/cortex-m4.cmake -DRXE_BUILD_TESTS=OFF
#
# Link rxe_runtime into your firmware with your own startup code and linker
# script (replace CMAKE_EXE_LINKER_FLAGS). The default link flags here
# (picolibc with semihosting, memory at the AN386's addresses) make images
# that run under qemu-system-arm; with them the unit tests also build and
# ctest runs them on the emulated board.
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)

set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
# The CPU and float ABI go on every compile and link (a -DCMAKE_C_FLAGS of
# your own adds to them instead of replacing them); picolibc's specs give
# the C library's headers.
set(RXE_CPU_FLAGS -mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16)
add_compile_options(${RXE_CPU_FLAGS} -ffunction-sections -fdata-sections --specs=picolibc.specs)
add_link_options(${RXE_CPU_FLAGS})
set(CMAKE_EXE_LINKER_FLAGS_INIT
    "--specs=picolibc.specs --oslib=semihost --crt0=semihost -Wl,--gc-sections \
-Wl,--defsym=__flash=0x0 -Wl,--defsym=__flash_size=0x400000 \
-Wl,--defsym=__ram=0x20000000 -Wl,--defsym=__ram_size=0x400000")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_CROSSCOMPILING_EMULATOR
    qemu-system-arm -M mps2-an386 -nographic -monitor none -serial none -semihosting -kernel)

set(RXE_NO_LIBM ON CACHE BOOL "Use the runtime's portable math functions instead of libm")
