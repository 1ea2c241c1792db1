# Cross-compile for aarch64 with Debian's gcc-aarch64-linux-gnu; ctest runs the binaries under
# qemu-user. HDF5 comes from the arm64 runtime package (libhdf5-103-1:arm64, multiarch); its headers
# are the host's, which differ from arm64's only in Fortran and float128 settings the C API does not use.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 CACHE STRING "")
set(QG_HDF5_LIB /usr/lib/aarch64-linux-gnu/libhdf5_serial.so.103 CACHE FILEPATH "")
set(QG_HDF5_INCLUDE /usr/include/hdf5/serial CACHE PATH "")
