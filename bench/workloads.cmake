# bench workloads: RankIo targets (POSIX, libckptfs), the byte pattern
# and the raw / torch / dcp save and load generators of ckptfs-bench.
# Included from bench/CMakeLists.txt (paths are relative to it).
add_library(ckptfs_bench_workloads STATIC
  data_pattern.cc
  dcp_layout.cc
  rank_io_native.cc
  rank_io.cc
  rank_io_posix.cc
  torch_tensors.cc
  torch_zip.cc
  workload.cc
  workload_buffers.cc
  workload_streams.cc)
target_compile_options(ckptfs_bench_workloads PRIVATE ${CKPTFS_WARNINGS})
target_include_directories(ckptfs_bench_workloads PUBLIC ${PROJECT_SOURCE_DIR} ${ISAL_INCLUDE_DIR})
target_link_libraries(ckptfs_bench_workloads PUBLIC
  ckptfs_client
  ckptfs_common
  ${ISAL_LIBRARY}
  absl::flat_hash_map
  absl::status
  absl::statusor
  absl::str_format
  absl::strings
  absl::synchronization)

# Runs SaveRank for every rank and FinalizeSave through PosixRankIo: the
# program the syscall-sequence tests trace with strace.
add_executable(ckptfs_bench_workload_trace workload_trace_main.cc)
target_compile_options(ckptfs_bench_workload_trace PRIVATE ${CKPTFS_WARNINGS})
target_link_libraries(ckptfs_bench_workload_trace PRIVATE ckptfs_bench_workloads)

if(BUILD_TESTING)
  add_executable(ckptfs_bench_workloads_test
    data_pattern_test.cc
    dcp_trace_test.cc
    rank_io_native_test.cc
    rank_io_posix_test.cc
    rank_io_testing.cc
    torch_tensors_test.cc
    torch_load_test.cc
    workload_test.cc)
  target_compile_options(ckptfs_bench_workloads_test PRIVATE ${CKPTFS_WARNINGS})
  target_compile_definitions(ckptfs_bench_workloads_test PRIVATE
    CKPTFS_BENCH_TRACE_PATH="$<TARGET_FILE:ckptfs_bench_workload_trace>")
  add_dependencies(ckptfs_bench_workloads_test ckptfs_bench_workload_trace)
  target_link_libraries(ckptfs_bench_workloads_test PRIVATE
    ckptfs_bench_workloads ckptfs_client_testing GTest::gtest_main)
  ckptfs_gtest(ckptfs_bench_workloads_test unit TEST_PREFIX "bench.")
endif()

# NativeRankIo against real daemons (LocalCluster): an integration test.
# (ckptfs_it_support is defined in tests/, added after tools/; names resolve
# at generate time.)
if(BUILD_TESTING)
  add_executable(ckptfs_bench_workloads_it rank_io_native_cluster_test.cc)
  target_compile_options(ckptfs_bench_workloads_it PRIVATE ${CKPTFS_WARNINGS})
  target_link_libraries(ckptfs_bench_workloads_it PRIVATE
    ckptfs_bench_workloads ckptfs_it_support GTest::gtest_main)
  foreach(daemon ckptfs-meta ckptfs-storage)
    if(TARGET ${daemon})
      add_dependencies(ckptfs_bench_workloads_it ${daemon})
    endif()
  endforeach()
  # One CTest test for the whole executable: its cases share the cluster
  # SetUpTestSuite starts.
  ckptfs_gtest(ckptfs_bench_workloads_it integration ONE_PROCESS TEST_PREFIX "bench."
    TIMEOUT 600)
endif()
