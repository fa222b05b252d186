# Cross-compiling glassbox for aarch64 Linux with Debian's cross toolchain (crossbuild-essential-arm64),
# against a sysroot of Debian's arm64 packages (tools/cross-arm64.sh builds one and sets
# GLASSBOX_ARM64_SYSROOT). Tests and custom commands run under qemu-user (CMAKE_CROSSCOMPILING_EMULATOR).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# The environment, not a cache variable: try_compile's nested projects read this file again.
if(NOT DEFINED ENV{GLASSBOX_ARM64_SYSROOT})
  message(FATAL_ERROR "toolchain-aarch64.cmake: set GLASSBOX_ARM64_SYSROOT to the arm64 sysroot (tools/cross-arm64.sh makes one)")
endif()
set(CMAKE_SYSROOT $ENV{GLASSBOX_ARM64_SYSROOT})
set(CMAKE_FIND_ROOT_PATH ${CMAKE_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(ENV{PKG_CONFIG_SYSROOT_DIR} ${CMAKE_SYSROOT})
set(ENV{PKG_CONFIG_LIBDIR} "${CMAKE_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${CMAKE_SYSROOT}/usr/share/pkgconfig")
# -cpu max: qemu's emulated CPU with every extension it knows (dotprod and i8mm among them).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L ${CMAKE_SYSROOT} -cpu max)
