# Cross build for aarch64 Linux from an x86-64 Debian machine (`make build-arm64`): Debian's
# cross compiler (g++-aarch64-linux-gnu) and the libraries as multiarch :arm64 packages
# (scripts/install.sh --arm64). Programs run at build time (protoc, grpc_cpp_plugin) are the
# host's; the binaries run under qemu-aarch64 (`make test-arm64`).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Debian multiarch: the target's libraries in /usr/lib/aarch64-linux-gnu, headers shared in
# /usr/include (arch-specific ones in /usr/include/aarch64-linux-gnu).
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
# The target loader and libraries are the multiarch ones (/lib/ld-linux-aarch64.so.1).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
# oneDNN: the headers unpacked by scripts/install.sh --arm64, the library of libdnnl2:arm64.
set(DNNL_INCLUDE ${CMAKE_CURRENT_LIST_DIR}/../third_party/arm64/usr/include CACHE PATH "")
set(DNNL_LIB /usr/lib/aarch64-linux-gnu/libdnnl.so.2 CACHE FILEPATH "")
