# One helper per target kind (STYLE.md §18): libraries, tests, binaries, benchmarks.

# Warnings on and clean; results must not depend on the compiler contracting a*b+c into an FMA
# (the engine's canonical numerics, docs/numerics.md), so contraction is off everywhere.
# GCC's -Wshadow=local (a local hiding a local) has no exact clang counterpart; clang, which only
# the fuzzing build uses (scripts/fuzz.sh), would warn that it does not know the option.
set(DS41_SHADOW_WARNING "")
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  set(DS41_SHADOW_WARNING -Wshadow=local)
endif()
set(DS41_WARNINGS -Wall -Wextra -Wpedantic ${DS41_SHADOW_WARNING} -Wno-unused-parameter -Werror=unused-result
    -Werror=return-type)
set(DS41_COMMON_FLAGS -ffp-contract=off -fno-fast-math)
if(DS41_SANITIZE)
  list(APPEND DS41_COMMON_FLAGS -fsanitize=${DS41_SANITIZE} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${DS41_SANITIZE})
endif()

# The fuzzing build (scripts/fuzz.sh, docs/fuzzing.md): every target gets libFuzzer's coverage
# instrumentation and ASan + UBSan, with UBSan findings fatal so the fuzzer stops on them; the
# harnesses alone link libFuzzer's main (fuzz/CMakeLists.txt).
if(DS41_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "DS41_FUZZ needs clang (libFuzzer): configure with -DCMAKE_CXX_COMPILER=clang++")
  endif()
  list(APPEND DS41_COMMON_FLAGS -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
       -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()

function(ds41_apply_flags target)
  target_compile_options(${target} PRIVATE ${DS41_WARNINGS} ${DS41_COMMON_FLAGS})
endfunction()

# ds41_library(name SOURCES a.cc b.cc DEPS x y)
function(ds41_library name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${A_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC ${A_DEPS})
  ds41_apply_flags(${name})
endfunction()

# ds41_binary(name SOURCES main.cc DEPS lib)
function(ds41_binary name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE ${A_DEPS})
  ds41_apply_flags(${name})
endfunction()

# ds41_test(name SOURCES x_test.cc DEPS lib LABEL unit)
function(ds41_test name)
  cmake_parse_arguments(A "" "LABEL" "SOURCES;DEPS" ${ARGN})
  if(NOT A_LABEL)
    set(A_LABEL unit)
  endif()
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE ${A_DEPS} GTest::gtest GTest::gtest_main)
  ds41_apply_flags(${name})
  gtest_discover_tests(${name} PROPERTIES LABELS ${A_LABEL} DISCOVERY_TIMEOUT 60)
endfunction()
