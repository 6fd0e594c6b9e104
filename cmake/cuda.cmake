# The CUDA backend (src/cuda/*.cu), included when nvcc is found.
#
# Architectures: sm_90 machine code plus compute_90 PTX, which the driver
# compiles for newer GPUs. A choice of the user's (-DCMAKE_CUDA_ARCHITECTURES
# or the CUDAARCHS environment variable) wins; otherwise this replaces the
# default that enable_language would pick from nvcc (75 with nvcc 13).
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
  set(CMAKE_CUDA_ARCHITECTURES "90-real;90-virtual" CACHE STRING "GPU architectures of the CUDA backend")
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
set(CMAKE_CUDA_EXTENSIONS OFF)
message(STATUS "libdml: CUDA architectures ${CMAKE_CUDA_ARCHITECTURES}")

# Warnings of nvcc itself and of the host compiler on the .cu files; the C
# warning flags (DML_WARNINGS) apply to C files only.
set(DML_CUDA_WARNINGS -Xcompiler=-Wall,-Wextra,-Wshadow)
if(DML_WERROR)
  list(APPEND DML_CUDA_WARNINGS -Werror=all-warnings -Xcompiler=-Werror)
endif()

file(GLOB DML_CUDA_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/*.cu)
# The ROI files share their FLOAT32 math with the CPU (src/ops/roi_*_math.h)
# and must round as it does: no contraction of a*b+c into FMA, which the CPU
# (C11 mode: -ffp-contract=off) never does either.
set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/roi_pooling.cu
                            ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/roi_align.cu PROPERTIES COMPILE_OPTIONS -fmad=false)
function(dml_add_cuda_backend target)
  target_sources(${target} PRIVATE ${DML_CUDA_SOURCES})
  target_compile_definitions(${target} PRIVATE DML_HAVE_CUDA=1)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${DML_CUDA_WARNINGS}>)
  # The headers only: the libraries link the runtime themselves (CMakeLists.txt).
  target_link_libraries(${target} PRIVATE CUDA::cudart_static)
endfunction()
