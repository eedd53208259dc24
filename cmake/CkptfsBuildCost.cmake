# The build's CPU cost: settings that make the same programs and tests with
# less compiling and linking. Included from the top-level CMakeLists.txt
# before the first add_subdirectory(); ckptfs_build_cost_targets() is called
# after the last one.
#
#   CKPTFS_LINKER          auto (default), mold, gold or bfd: the linker of
#                          every executable. auto takes mold when the compiler
#                          can use it (Debian's mold; scripts/install-deps.sh
#                          installs it), else gold, else the compiler's
#                          default (bfd).
#   CKPTFS_DEBUG_LEVEL     1 (default) or 2: GCC's -g level in RelWithDebInfo
#                          builds. 1 keeps functions and line tables (gdb,
#                          perf and addr2line name the function, file and line
#                          of every frame) without local variables and types;
#                          2 is CMake's plain -g, full debug information.
#   CKPTFS_TEST_OPT_LEVEL  1 (default) or 2: the -O level, in RelWithDebInfo
#                          builds, of the test programs' own sources (the
#                          targets that link GoogleTest: *_test.cc, *_it.cc
#                          and tests/integration's LocalCluster). What they
#                          test (every library, daemon and tool) is -O2
#                          either way.
#   CKPTFS_PCH             ON (default) or OFF: precompiled headers. Every C++
#                          library and executable reuses one of two:
#                          ckptfs_pch_test (the standard library, Abseil,
#                          Protobuf, gRPC and GoogleTest) for targets that
#                          link GoogleTest, ckptfs_pch_base (the same without
#                          GoogleTest) for the others. Sources keep including
#                          what they use: the lock-annotation check
#                          (tests/repo) compiles each one without them.
#
# The programs' optimization level (-O2 for RelWithDebInfo) and the warnings
# stay as they are.

set(CKPTFS_LINKER auto CACHE STRING "linker for executables: auto, mold, gold or bfd")
set_property(CACHE CKPTFS_LINKER PROPERTY STRINGS auto mold gold bfd)
set(CKPTFS_DEBUG_LEVEL 1 CACHE STRING
  "GCC -g level of RelWithDebInfo builds: 1 (functions and line tables) or 2 (full)")
set_property(CACHE CKPTFS_DEBUG_LEVEL PROPERTY STRINGS 1 2)
set(CKPTFS_TEST_OPT_LEVEL 1 CACHE STRING
  "-O level of the test programs' own sources in RelWithDebInfo builds: 1 or 2")
set_property(CACHE CKPTFS_TEST_OPT_LEVEL PROPERTY STRINGS 1 2)
option(CKPTFS_PCH "precompiled headers (standard library, Abseil, Protobuf, gRPC, GoogleTest)"
  ON)
if(NOT CKPTFS_DEBUG_LEVEL MATCHES "^[12]$")
  message(FATAL_ERROR "CKPTFS_DEBUG_LEVEL is '${CKPTFS_DEBUG_LEVEL}': 1 or 2")
endif()
if(NOT CKPTFS_TEST_OPT_LEVEL MATCHES "^[12]$")
  message(FATAL_ERROR "CKPTFS_TEST_OPT_LEVEL is '${CKPTFS_TEST_OPT_LEVEL}': 1 or 2")
endif()

# The linker.
include(CheckLinkerFlag)
set(ckptfs_linker_choice ${CKPTFS_LINKER})
if(CKPTFS_LINKER STREQUAL "auto")
  set(ckptfs_linker_choice bfd)
  foreach(candidate mold gold)
    check_linker_flag(CXX "-fuse-ld=${candidate}" CKPTFS_HAVE_LINKER_${candidate})
    if(CKPTFS_HAVE_LINKER_${candidate})
      set(ckptfs_linker_choice ${candidate})
      break()
    endif()
  endforeach()
elseif(NOT CKPTFS_LINKER MATCHES "^(mold|gold|bfd)$")
  message(FATAL_ERROR "CKPTFS_LINKER is '${CKPTFS_LINKER}': auto, mold, gold or bfd")
elseif(NOT CKPTFS_LINKER STREQUAL "bfd")
  check_linker_flag(CXX "-fuse-ld=${CKPTFS_LINKER}" CKPTFS_HAVE_LINKER_${CKPTFS_LINKER})
  if(NOT CKPTFS_HAVE_LINKER_${CKPTFS_LINKER})
    message(FATAL_ERROR "CKPTFS_LINKER is ${CKPTFS_LINKER}, which the compiler cannot use")
  endif()
endif()
if(NOT ckptfs_linker_choice STREQUAL "bfd")
  add_link_options(-fuse-ld=${ckptfs_linker_choice})
endif()
message(STATUS "ckptfs: linker ${ckptfs_linker_choice}; RelWithDebInfo: -g${CKPTFS_DEBUG_LEVEL}, "
  "test sources -O${CKPTFS_TEST_OPT_LEVEL}; precompiled headers ${CKPTFS_PCH}")

# The debug information: GCC takes the last -g level given, and these
# options follow CMAKE_CXX_FLAGS_RELWITHDEBINFO (-O2 -g -DNDEBUG).
add_compile_options($<$<CONFIG:RelWithDebInfo>:-g${CKPTFS_DEBUG_LEVEL}>)
# The test sources' level, after -O2 likewise (GCC takes the last -O).
set(ckptfs_test_opt $<$<CONFIG:RelWithDebInfo>:-O${CKPTFS_TEST_OPT_LEVEL}>)

# The precompiled headers: what most translation units include, from
# Debian's packages (never ckptfs's own or generated headers, so that no
# change to ckptfs rebuilds them). tests/repo/check_thread_safety.py reads
# this list for clang's precompiled headers too.
set(CKPTFS_PCH_BASE_HEADERS
  <algorithm> <atomic> <cerrno> <chrono> <cstdint> <cstring> <filesystem> <fstream>
  <functional> <map> <memory> <mutex> <optional> <set> <sstream> <string> <thread>
  <utility> <vector>
  <absl/container/flat_hash_map.h> <absl/status/status.h> <absl/status/statusor.h>
  <absl/strings/match.h> <absl/strings/numbers.h> <absl/strings/str_cat.h>
  <absl/strings/str_format.h> <absl/strings/str_join.h> <absl/strings/str_split.h>
  <absl/strings/string_view.h> <absl/synchronization/mutex.h> <absl/time/clock.h>
  <absl/time/time.h>
  <google/protobuf/generated_message_reflection.h> <google/protobuf/message.h>
  <google/protobuf/repeated_field.h>
  <grpcpp/grpcpp.h>)
set(CKPTFS_PCH_TEST_HEADERS ${CKPTFS_PCH_BASE_HEADERS} <gtest/gtest.h>)

# ckptfs_build_cost_targets(): gives every C++ library and executable
# defined so far (in this directory and below) the test sources' -O level
# when it links GoogleTest, and with CKPTFS_PCH one of the two precompiled
# headers.
function(ckptfs_build_cost_targets)
  if(CKPTFS_PCH)
    set(anchor ${CMAKE_BINARY_DIR}/ckptfs_pch_anchor.cxx)
    file(WRITE ${anchor} "// Empty: the source of the targets that own the precompiled headers.\n")
    set(libraries absl::flat_hash_map absl::status absl::statusor absl::strings
      absl::str_format absl::synchronization absl::time protobuf::libprotobuf gRPC::grpc++)
    add_library(ckptfs_pch_base OBJECT ${anchor})
    target_link_libraries(ckptfs_pch_base PRIVATE ${libraries})
    target_compile_options(ckptfs_pch_base PRIVATE -pthread)
    target_precompile_headers(ckptfs_pch_base PRIVATE ${CKPTFS_PCH_BASE_HEADERS})
    if(TARGET GTest::gtest)
      add_library(ckptfs_pch_test OBJECT ${anchor})
      target_link_libraries(ckptfs_pch_test PRIVATE ${libraries} GTest::gtest)
      target_compile_options(ckptfs_pch_test PRIVATE ${ckptfs_test_opt} -pthread)
      target_precompile_headers(ckptfs_pch_test PRIVATE ${CKPTFS_PCH_TEST_HEADERS})
    endif()
  endif()

  ckptfs_collect_targets(targets ${CMAKE_CURRENT_SOURCE_DIR})
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(NOT type MATCHES "^(STATIC_LIBRARY|OBJECT_LIBRARY|SHARED_LIBRARY|EXECUTABLE)$"
        OR target MATCHES "^ckptfs_pch_")
      continue()
    endif()
    get_target_property(libraries ${target} LINK_LIBRARIES)
    set(donor ckptfs_pch_base)
    if(libraries MATCHES "GTest::")
      set(donor ckptfs_pch_test)
      target_compile_options(${target} PRIVATE ${ckptfs_test_opt})
    endif()
    if(CKPTFS_PCH)
      # GCC uses a precompiled header only where _REENTRANT is as it was
      # when the header was made (-pthread defines it, and the libraries
      # give it to nearly every target): the few others get it here.
      target_compile_options(${target} PRIVATE -pthread)
      target_precompile_headers(${target} REUSE_FROM ${donor})
    endif()
  endforeach()
endfunction()

# ckptfs_collect_targets(OUT_VAR DIR): the targets of DIR and every
# directory below it.
function(ckptfs_collect_targets out_var dir)
  get_property(found DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(subdir IN LISTS subdirs)
    ckptfs_collect_targets(below ${subdir})
    list(APPEND found ${below})
  endforeach()
  set(${out_var} ${found} PARENT_SCOPE)
endfunction()
