# Android app libraries with the NDK: the NDK's own toolchain file
# (build/cmake/android.toolchain.cmake) with relax_edge's choices for a
# library that an app loads with System.loadLibrary: C only (no C++ runtime),
# API level 24 unless told, and the link flags that
# relax_edge/android/library.py uses (16 KB pages, no executable stack, no
# text relocations, both hash styles, a build id).
#
#   cmake -S app -B build/arm64-v8a -DCMAKE_TOOLCHAIN_FILE=<sdk>/cmake/android-ndk.toolchain.cmake \
#         -DANDROID_ABI=arm64-v8a -DANDROID_PLATFORM=24
#
# The NDK is ANDROID_NDK (a -D option), else the ANDROID_NDK_HOME or
# ANDROID_NDK_ROOT environment variable. ANDROID_ABI is arm64-v8a,
# armeabi-v7a or x86_64 (the android-arm64, android-armv7 and android-x86_64
# boards). In Gradle, externalNativeBuild passes ANDROID_NDK, ANDROID_ABI and
# ANDROID_PLATFORM itself: name this file in its cmake arguments.
if(NOT ANDROID_NDK)
  if(DEFINED ENV{ANDROID_NDK_HOME} AND NOT "$ENV{ANDROID_NDK_HOME}" STREQUAL "")
    set(ANDROID_NDK "$ENV{ANDROID_NDK_HOME}")
  elseif(DEFINED ENV{ANDROID_NDK_ROOT} AND NOT "$ENV{ANDROID_NDK_ROOT}" STREQUAL "")
    set(ANDROID_NDK "$ENV{ANDROID_NDK_ROOT}")
  else()
    message(FATAL_ERROR "relax_edge android-ndk.toolchain.cmake: no NDK; pass -DANDROID_NDK=<ndk> "
                        "or set ANDROID_NDK_HOME")
  endif()
endif()
set(RXE_NDK_TOOLCHAIN "${ANDROID_NDK}/build/cmake/android.toolchain.cmake")
if(NOT EXISTS "${RXE_NDK_TOOLCHAIN}")
  message(FATAL_ERROR "relax_edge android-ndk.toolchain.cmake: ${ANDROID_NDK} is not an Android NDK "
                      "(no build/cmake/android.toolchain.cmake in it)")
endif()

if(NOT ANDROID_ABI)
  set(ANDROID_ABI arm64-v8a)
endif()
if(NOT ANDROID_ABI MATCHES "^(arm64-v8a|armeabi-v7a|x86_64)$")
  message(FATAL_ERROR "relax_edge android-ndk.toolchain.cmake: ANDROID_ABI ${ANDROID_ABI} has no relax_edge "
                      "board; use arm64-v8a, armeabi-v7a or x86_64")
endif()
if(NOT ANDROID_PLATFORM)
  set(ANDROID_PLATFORM 24)
endif()
if(NOT ANDROID_STL)
  set(ANDROID_STL none)                            # the runtime and the JNI glue are C
endif()
set(ANDROID_SUPPORT_FLEXIBLE_PAGE_SIZES ON)        # NDK r27+: 16 KB page alignment by itself

include("${RXE_NDK_TOOLCHAIN}")

string(APPEND CMAKE_SHARED_LINKER_FLAGS_INIT
       " -Wl,-z,max-page-size=16384 -Wl,-z,noexecstack -Wl,-z,text -Wl,--hash-style=both -Wl,--build-id")
