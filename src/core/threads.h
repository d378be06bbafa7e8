// Thread control: crucible has exactly one thread pool, OpenMP's. oneDNN is
// built on the same OpenMP runtime, so one setting governs every kernel and the
// GEMM library (two busy-waiting pools on 2 cores halve throughput).
#pragma once

namespace crucible {

// Sets the thread count for all kernels and GEMMs. n <= 0 means OMP_NUM_THREADS
// when set, else all cores.
void set_num_threads(int n);
int num_threads();
int hardware_threads();

// For background threads (checkpoint writer, data prefetch, heartbeat): blocks
// SIGINT and SIGTERM on the calling thread, so those signals always reach a
// thread that expects them (the training thread polls a flag at step
// boundaries) and never interrupt a helper in the middle of a system call.
void block_stop_signals_in_this_thread();

}  // namespace crucible
