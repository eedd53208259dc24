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
