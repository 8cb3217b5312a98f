# Cross build for 64-bit Arm Linux with Debian's g++-aarch64-linux-gnu; the test binaries run
# under qemu-aarch64 (CMAKE_CROSSCOMPILING_EMULATOR: CTest and gtest_discover_tests use it).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# The loader (ld-linux-aarch64.so.1) comes from the cross toolchain's root (-L); its library path
# puts the same root's libc first. Without it the loader also searches /lib/aarch64-linux-gnu, where
# Debian's multiarch libc6:arm64 (pulled in by libbenchmark-dev:arm64) may be a different build than
# the loader: such a mismatched pair hangs in the first pthread_create (every threaded test did).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib)
